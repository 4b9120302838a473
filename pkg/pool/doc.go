// Package pool turns a configured pool into live backends and holds the
// rules of dialing them.
//
// A Pool combines, per backend, the manual admin switch and the breaker
// (pkg/breaker, one shared Store), the active health checks (pkg/health) and
// the connection counts into one "usable" answer that the picker
// (pkg/pick) reads lock-free on every pick. The backends form two sets,
// the primaries and the backups (backup = true), each with its picker;
// the backups take new clients only while no primary is in rotation
// (backup.go).
//
// The event loops (pkg/relay, pkg/udpsession) make the client dials
// themselves, with non-blocking connects; the pool gives them the rules. Plan lists the
// picker's candidates within the retry budget, or, when no backend is
// usable, exactly the one to force-try: the one closest to recovery
// (docs/breaker.md, rule 6), a primary unless none may be tried. BeginDial counts a dial as load on its
// backend from before connect(2) and captures the breaker generation then;
// EndDial records the outcome in the dial counters and with the breaker;
// Pending leaves a connected dial's result open for the relay to Settle
// when count_early_reset judges a dial by the backend's first move; EndRelay
// gives the connection's count back; Await is Pending for a UDP session's
// first datagram, always settled later. The pool's own dials, the
// breaker's recovery probe and the health checks, run on their goroutines:
// the check follows the pool's protocol and health type (TCP connect, TCP
// or UDP send-expect), and a UDP pool's probe is its send-expect request or
// else one empty datagram that fails only when refused (probe.go).
package pool
