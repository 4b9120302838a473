package loop

// RUNNING PART
// A running loop publishes its connections, events, sleeps and coalesced
// waits, and counts a task's run as busy.
func TestStatsOfARunningLoop(t *testing.T) {
	k := testnet.StartTaker(t)
	var now atomic.Int64 // the loop's clock, moved by its tasks only
	h := newHarness(t, harnessOpts{clock: now.Load, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	start := l.Stats()

	p := h.open("p", k)
	p.ping(t)
	if !waitUntil(20*time.Second, func() bool { return l.Stats().Conns == 1 }) {
		t.Fatalf("loop stats show %d connections, want 1", l.Stats().Conns)
	}
	h.on(l, func() { now.Add(int64(50 * time.Millisecond)) }) // a task that works 50ms
	if !waitUntil(20*time.Second, func() bool { return l.Stats().Busy-start.Busy == 50*time.Millisecond }) {
		t.Fatalf("busy grew by %v over a 50ms task", l.Stats().Busy-start.Busy)
	}
	p.close()
	if !waitUntil(20*time.Second, func() bool { return l.Stats().Conns == 0 }) {
		t.Fatalf("loop stats show %d connections after the close, want 0", l.Stats().Conns)
	}
	var end Stats
	h.on(l, func() {
		l.poll.gathers++ // as a coalesced window would
		l.beforeWait(true)
		end = l.Stats()
	})
	// accept, connect, data and both hang-ups, the tasks: more than five
	if end.Events-start.Events < 5 || end.Sleeps <= start.Sleeps || end.Coalesced != start.Coalesced+1 {
		t.Fatalf("stats went from %+v to %+v: want events, sleeps and the coalesced wait counted", start, end)
	}
}
