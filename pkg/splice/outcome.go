package splice

// Outcome says how a relayed connection ended.
type Outcome int32

const (
	// Completed: both sides closed their write halves cleanly.
	Completed Outcome = iota + 1
	// IdleTimeout: nothing moved for the idle timeout.
	IdleTimeout
	// ClientReset: the client reset (or broke) the connection; the backend
	// was reset in turn.
	ClientReset
	// BackendReset: the backend reset (or broke) the connection; the client
	// was reset in turn.
	BackendReset
	// Aborted: the connection was cut from outside, e.g. when a
	// shutdown ran out of time.
	Aborted
)

var outcomeNames = [...]string{"", "completed", "idle-timeout", "client-reset", "backend-reset", "aborted"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}
