package main

import "strings"

// Two opt-in l4lb variants that change how a loop waits for its next
// event. Beside l4lb, their rows show what a proxy's sleeping costs the
// clients and backends on the same host (connection and request rates)
// and what not sleeping costs the proxy (CPU per connection, per request):
// -systems l4lb,l4lb-busy,l4lb-eager,haproxy -scenario conn,redis.
const (
	// sysL4lbBusy polls 20 µs before it sleeps: that reached HAProxy's
	// rates at about HAProxy's CPU in the conn and redis scenarios.
	sysL4lbBusy = "l4lb-busy"
	// sysL4lbEager has no wake-up coalescing (20us by default): every
	// wait sleeps until the next event wakes it.
	sysL4lbEager = "l4lb-eager"
)

func l4lbBusySystem() systemSpec  { return l4lbGlobalVariant(sysL4lbBusy, `busy_poll = "20us"`) }
func l4lbEagerSystem() systemSpec { return l4lbGlobalVariant(sysL4lbEager, `wake_coalesce = "0s"`) }

// l4lbGlobalVariant is an opt-in l4lb with key (one TOML line) in its
// [global] table.
func l4lbGlobalVariant(name, key string) systemSpec {
	s := l4lbVariant(name, nil, " with [global] "+key, nil)
	s.optIn = true
	s.l4lbKeys = l4lbKeys{global: strings.TrimSpace(key) + "\n"}
	return s
}
