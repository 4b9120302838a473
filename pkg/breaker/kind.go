package breaker

// Kind says why a dial was made. Health-check dials never reach the breaker,
// so they have no Kind here.
type Kind uint8

const (
	// KindClient is a dial for a client connection, dialer retries included.
	KindClient Kind = iota
	// KindProbe is the breaker's own recovery probe (rule 3).
	KindProbe
	// KindForce is an all-down force-try (rule 6).
	KindForce
)

// String returns the metric label value: "client", "probe" or "force".
func (k Kind) String() string {
	switch k {
	case KindClient:
		return "client"
	case KindProbe:
		return "probe"
	case KindForce:
		return "force"
	}
	return "unknown"
}

// Result is the caller's classification of one dial.
type Result uint8

const (
	// Success: the connect completed.
	Success Result = iota
	// Failure: refused, reset, unreachable or timed out (the backend's fault).
	Failure
	// Local: local trouble (EMFILE, EADDRNOTAVAIL, ENOBUFS, client gone
	// mid-dial). Counts neither way.
	Local
)

// String returns the metric label value: "success", "failure" or "local".
func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Local:
		return "local"
	}
	return "unknown"
}
