package main

import (
	"fmt"
	"math"
)

// sysL4lbPolicy is l4lb with every traffic-policy check of issue 14 on and
// passing: beside l4lb in the conn scenario, its rows are the checks' cost.
const sysL4lbPolicy = "l4lb-policy"

// policyListenerKeys turn on access control and the per-source limits with
// bounds the bench's one client address never reaches, so every check runs
// and none refuses: allow and deny of a few prefixes each, a per-source
// connection cap and a per-source rate far above the load.
const policyListenerKeys = `allow = ["127.0.0.0/8", "10.0.0.0/8", "192.168.0.0/16", "::1/128"]
deny = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]
max_connections_per_source = 1000000
rate_per_source = 1000000.0
`

// policyPoolKeys: a connection cap per backend is checked on every dial
// by compare-and-swap; the bench's backends have none, so the pool keys
// add nothing here but the queue's timeout.
const policyPoolKeys = "queue_timeout = \"1s\"\n"

// l4lbPolicySystem is opt-in: -systems l4lb,l4lb-policy -scenario conn.
func l4lbPolicySystem() systemSpec {
	s := l4lbVariant(sysL4lbPolicy, nil, " with allow/deny, per-source connection and rate limits on (never reached)", nil)
	s.optIn = true
	s.l4lbKeys = l4lbKeys{listener: policyListenerKeys, pool: policyPoolKeys}
	return s
}

// policyNote compares l4lb with and without its policy checks by their
// medians in one scenario: connection rate and CPU per connection.
func policyNote(sr *ScenarioResult) (string, bool) {
	var on, off bool
	for _, r := range sr.Rows {
		on = on || (r.System == sysL4lbPolicy && r.NA == "")
		off = off || (r.System == "l4lb" && r.NA == "")
	}
	if !on || !off {
		return "", false
	}
	rateOn, rateOff := sr.summary(sysL4lbPolicy, "conn_per_s").Median, sr.summary("l4lb", "conn_per_s").Median
	cpuOn, cpuOff := sr.summary(sysL4lbPolicy, "cpu_us_per_conn").Median, sr.summary("l4lb", "cpu_us_per_conn").Median
	if rateOff == 0 || math.IsNaN(rateOn) || math.IsNaN(cpuOn) {
		return "", false
	}
	return fmt.Sprintf("traffic policy on (l4lb-policy) vs off (l4lb): %.0f vs %.0f conn/s (%+.1f%%), %.1f vs %.1f µs CPU per connection (%+.1f µs)",
		rateOn, rateOff, 100*(rateOn/rateOff-1), cpuOn, cpuOff, cpuOn-cpuOff), true
}
