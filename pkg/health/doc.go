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
//   - TLSCheck: a TCP connect and a TLS handshake with a server name, the
//     certificate verified against a CAFile when one is given (else not
//     at all: it proves TLS is served, not by whom), then close_notify and
//     a clean close; the handshake's error is the cause of a failure.
//
// Health checks feed health state only, never the breaker. The dial itself
// is injected (a DialFunc, such as the proxy's dialer); a check that reports
// Inconclusive (local trouble such as EMFILE or EADDRNOTAVAIL, a check
// called off, a CAFile that cannot be read) counts neither way. A backend
// starts up, so a fresh start is never all-down.
//
// A check's Outcome carries, beside its Result, the error that decided a
// Fail or an Inconclusive: the dial's or the socket's error, a timeout, or
// a reply that differs from the expected one or stops short of it (both
// shown, quoted or in hex). The prober keeps the last one in
// Status.LastError, logs each failed or inconclusive check at debug, and
// adds the cause to the info line of a change to down.
//
//	p, err := health.New("web/10.0.0.1:80", cfg, health.TCPCheck(dial, "10.0.0.1:80", isLocal),
//	        health.Options{OnChange: func(key string, up bool) { ... }})
//	go p.Run(ctx)   // returns when ctx is done; p.Up() is lock-free
//
// Many probers share a Scheduler instead of a goroutine each: one
// goroutine and a timer heap for all of them, the checks run on workers
// started on demand (at most the bound NewScheduler is given), each
// prober's checks at its own phase of the interval:
//
//	s := health.NewScheduler(0)  // one per process
//	wait := s.Add(ctx, p)        // checks p until ctx is done
//	wait()                       // returns once p's check in flight has returned
package health
