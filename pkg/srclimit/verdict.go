package srclimit

// Verdict is Admit's decision on one new connection.
type Verdict uint8

const (
	// Admit: the connection may proceed; it counts against its source
	// until Release.
	Admit Verdict = iota
	// OverConns: the source has MaxConns connections open.
	OverConns
	// OverRate: the source's bucket is empty.
	OverRate
)

// String is the verdict as a metrics label: "ok", "source_connections" or
// "source_rate".
func (v Verdict) String() string {
	switch v {
	case Admit:
		return "ok"
	case OverConns:
		return "source_connections"
	case OverRate:
		return "source_rate"
	}
	return "unknown"
}
