package splice

import "testing"

// At the pool's cap, a loop that finds no pipe in its own cache gets the
// slot of an idle pipe another loop's cache holds: that cache gives it up
// at its next wake-up (Publish), and the next stream of the first loop
// splices again instead of copying for as long as the other loop idles.
func TestIdlePipeGivesWayToALoopAtTheCap(t *testing.T) {
	pp := NewPipePool(PipePoolConfig{Size: 64 << 10, MaxOpen: 3, MaxIdle: 2})
	a, b := pp.NewCache(), pp.NewCache()
	defer a.Close()
	defer b.Close()
	p1, p2 := a.get(), a.get()
	if p1 == nil || p2 == nil {
		t.Fatal("no pipe under the cap")
	}
	a.put(p1) // kept idle in a: its share is 1, and the pool is under its cap
	a.Publish()
	p3 := b.get()
	if p3 == nil {
		t.Fatal("no pipe for b under the cap")
	}
	if p := b.get(); p != nil {
		t.Fatal("a pipe past the cap")
	}
	if st := pp.Stats(); st.Open != 3 || st.Idle != 1 {
		t.Fatalf("before a's wake-up: %+v, want 3 open, 1 idle (in a)", st)
	}
	a.Publish() // a's next wake-up
	if st := pp.Stats(); st.Open != 2 || st.Idle != 0 {
		t.Fatalf("after a's wake-up: %+v, want a's idle pipe closed", st)
	}
	p4 := b.get()
	if p4 == nil {
		t.Fatal("b still has no pipe after a gave its idle one up")
	}
	a.Publish() // nothing wanted any more: a keeps what it has
	for _, p := range []*pipe{p2, p3, p4} {
		p.close()
		pp.open.Add(-1)
	}
}
