package breaker

// Events are optional hooks, called synchronously from the goroutine that
// caused them, after the transition is in the Store and in the snapshot.
// They must be cheap and must not call back into the Breaker (a hook runs
// inside Done, the probe loop or an admin call): whatever a hook needs is in
// its arguments. The wiring turns them into Prometheus counters and
// recomputes the backend's usability from st. Each receives the key passed
// to New.
type Events struct {
	// Trip: this instance opened the breaker (rule 1). Not an alert.
	// st.LocalOnly: opened on this instance alone, below the fleet's
	// trip quorum (quorum.go); Trip, Close and Reopen then report this
	// instance's own transitions, which leave the Store as it was.
	Trip func(key string, st State)
	// Close: this instance closed the breaker (rule 3).
	Close func(key string, st State)
	// Reopen: a failed probe re-opened the breaker (rule 4).
	Reopen func(key string, st State)
	// ProbeFailure: the alert of rule 4 (l4lb_breaker_probe_failures_total).
	ProbeFailure func(key string)
	// Stale: a result was ignored because its dial began before a
	// transition (rule 2, l4lb_breaker_stale_results_total).
	Stale func(key string)
	// Dial: every result handed to Done, Local included.
	Dial func(key string, k Kind, r Result)
	// Changed: the local snapshot took a new generation, open state or
	// disable, whoever made the change (this instance, another sharing
	// the Store, an operator, an upgrade's old process): what a picker
	// that caches usability must hear of, since nothing else tells it of
	// a change made elsewhere. It also runs, just before Trip, Close or
	// Reopen, for this instance's own transitions.
	Changed func(key string, st State)
	// Dropped: a transition a result asked for (Options.Async) was never
	// made: the queue to Run was full, or Run had stopped and no successor
	// (HandOver) took it, as for a backend a reload removed.
	Dropped func(key string)
}

func call(f func(string), key string) {
	if f != nil {
		f(key)
	}
}

func callState(f func(string, State), key string, st State) {
	if f != nil {
		f(key, st)
	}
}
