package main

// sysL4lbBusy is l4lb with [global] busy_poll on: beside l4lb, its rows
// show what polling before sleeping buys the clients and backends on the
// same host (connection and request rates) and what it costs the proxy
// (CPU per connection, per request).
const sysL4lbBusy = "l4lb-busy"

// busyPollKey is the measured setting: 20 µs reached HAProxy's rates at
// about HAProxy's CPU in the conn and redis scenarios.
const busyPollKey = "busy_poll = \"20us\"\n"

// l4lbBusySystem is opt-in: -systems l4lb,l4lb-busy,haproxy -scenario conn,redis.
func l4lbBusySystem() systemSpec {
	s := l4lbVariant(sysL4lbBusy, nil, " with [global] busy_poll = \"20us\"", nil)
	s.optIn = true
	s.l4lbKeys = l4lbKeys{global: busyPollKey}
	return s
}
