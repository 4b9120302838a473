package breaker

// Events are optional hooks, called synchronously from the goroutine that
// caused them. They must be cheap and must not call back into the Breaker:
// the wiring turns them into Prometheus counters. Each receives the key
// passed to New.
type Events struct {
	// Trip: this instance opened the breaker (rule 1). Not an alert.
	Trip func(key string)
	// Close: this instance closed the breaker (rule 3).
	Close func(key string)
	// Reopen: a failed probe re-opened the breaker (rule 4).
	Reopen func(key string)
	// ProbeFailure: the alert of rule 4 (l4lb_breaker_probe_failures_total).
	ProbeFailure func(key string)
	// Stale: a result was ignored because its dial began before a
	// transition (rule 2, l4lb_breaker_stale_results_total).
	Stale func(key string)
	// Dial: every result handed to Done, Local included.
	Dial func(key string, k Kind, r Result)
}

func call(f func(string), key string) {
	if f != nil {
		f(key)
	}
}
