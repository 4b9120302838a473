// Package pool turns a configured pool into live backends and connects
// clients to them.
//
// A Pool combines, per backend, the manual admin switch and the breaker
// (pkg/breaker, one shared Store), the active health checks (pkg/health) and
// the connection counts into one "usable" answer that the picker
// (pkg/pick) reads lock-free on every pick. Connect walks the picker's
// candidates within the retry budget, recording every dial's outcome with
// the breaker, and when no backend is usable it force-tries exactly the one
// closest to recovery (DESIGN.md, breaker rule 6).
package pool
