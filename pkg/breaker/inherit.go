package breaker

// Inherit carries prev's failure window, recovery count and open of this
// instance alone (below a trip quorum) over to b, the
// breaker that replaces prev for the same backend at a reload. Without it
// every reload emptied the window, so a backend failing steadily under
// frequent reloads (a service-discovery template, say) never gathered
// `failures` in one window: it hid behind reloads as rule 1 forbids it to
// hide behind its successes. Failures of a generation other than the one
// b's next result carries are dropped by the window's own rule, and
// failures older than b's window no longer count. Call it before b serves;
// prev may still be recording the results of its last dials.
func (b *Breaker) Inherit(prev *Breaker) {
	if prev == nil || prev == b || prev.key != b.key {
		return
	}
	prev.mu.Lock()
	win := prev.win.clone()
	rec := prev.recovery
	lo, lgen := prev.local.Load(), prev.localGen.Load()
	prev.mu.Unlock()

	b.mu.Lock()
	defer b.mu.Unlock()
	b.win.carry(win)
	b.recovery = rec
	// The open of this instance alone (quorum.go) and the local
	// generation go on too: dials prev handed out stay judged by them.
	b.localGen.Store(lgen)
	if !b.snap.Load().Open {
		b.local.Store(lo)
	}
}
