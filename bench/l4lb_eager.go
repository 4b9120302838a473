package main

// sysL4lbEager is l4lb with [global] wake_coalesce = "0s": every wait
// sleeps until the next event wakes it. Beside l4lb (20us by default),
// its rows show what coalescing wake-ups buys the clients and backends on
// the same host (request rates) and what it costs the proxy.
const sysL4lbEager = "l4lb-eager"

const wakeCoalesceOffKey = "wake_coalesce = \"0s\"\n"

// l4lbEagerSystem is opt-in: -systems l4lb,l4lb-eager,haproxy -scenario conn,redis.
func l4lbEagerSystem() systemSpec {
	s := l4lbVariant(sysL4lbEager, nil, " with [global] wake_coalesce = \"0s\" (no wake-up coalescing)", nil)
	s.optIn = true
	s.l4lbKeys = l4lbKeys{global: wakeCoalesceOffKey}
	return s
}
