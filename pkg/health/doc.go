// Package health is l4lb's active health checker: it runs a check against
// one backend every Interval (jittered, so many backends' checks do not
// align), applies rise/fall hysteresis and reports up/down changes.
//
// The checks, each bounded by its ctx (the check timeout):
//
//   - TCPCheck: a TCP connect, closed at once.
//   - TCPSendExpectCheck: a TCP connect, send bytes, pass when the reply
//     starts with the expected bytes; a backend that accepts and closes at
//     once fails it.
//   - UDPSendExpectCheck: one datagram on a connected UDP socket, pass when
//     the reply datagram starts with the expected bytes; an ICMP port
//     unreachable fails at once.
//   - UDPRefusalCheck: one empty datagram; fails only on an ICMP error,
//     passes on a reply or silence (no evidence of refusal). The breaker
//     probes UDP backends with it when no send-expect check is configured.
//
// Health checks feed health state only, never the breaker. The dial itself
// is injected (a DialFunc, such as the proxy's dialer); a check that reports
// Inconclusive (local trouble such as EMFILE or EADDRNOTAVAIL, or a check
// called off) counts neither way. A backend starts up, so a fresh start is
// never all-down.
//
//	p, err := health.New("web/10.0.0.1:80", cfg, health.TCPCheck(dial, "10.0.0.1:80", isLocal),
//	        health.Options{OnChange: func(key string, up bool) { ... }})
//	go p.Run(ctx)   // returns when ctx is done; p.Up() is lock-free
package health
