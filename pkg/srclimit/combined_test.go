package srclimit

import "testing"

func TestConnsOverWithTokensLeft(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 2, Rate: 1, Burst: 5})
	a := v4(1)
	expect(t, l, a, 0, Admit)
	expect(t, l, a, 0, Admit)
	for range 100 {
		expect(t, l, a, 0, OverConns)
	}
	// The refusals took no token: 3 are left for 3 more connections.
	l.Release(a)
	l.Release(a)
	expect(t, l, a, 0, Admit)
	expect(t, l, a, 0, Admit)
	l.Release(a)
	expect(t, l, a, 0, Admit)
	expect(t, l, a, 0, OverConns)
	l.Release(a)
	expect(t, l, a, 0, OverRate)
	if n := check(t, l); n != 1 {
		t.Fatalf("counts = %d, want 1", n)
	}
}

func TestRateOverWithRoomForConns(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 3, Rate: 1, Burst: 1})
	a := v4(1)
	expect(t, l, a, 0, Admit)
	for range 100 {
		expect(t, l, a, 500*ms, OverRate)
	}
	// The refusals left no count: 2 more fit under the cap as tokens come.
	if n := check(t, l); n != 1 {
		t.Fatalf("counts = %d after refusals by rate, want 1", n)
	}
	expect(t, l, a, s1, Admit)
	expect(t, l, a, 2*s1, Admit)
	expect(t, l, a, 3*s1, OverConns)
}

func TestBothOverIsOverConns(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 1, Rate: 1, Burst: 1})
	a := v4(1)
	expect(t, l, a, 0, Admit)
	expect(t, l, a, 0, OverConns) // at the cap and out of tokens: the cap is checked first
	l.Release(a)
	expect(t, l, a, 0, OverRate)
	expect(t, l, a, s1, Admit)
}

func TestReleaseDropsOnlyDeadEntries(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 1, Rate: 1, Burst: 1})
	a := v4(1)
	expect(t, l, a, 0, Admit)
	l.Release(a) // bucket still empty: the entry must stay
	if n := l.Sources(); n != 1 {
		t.Fatalf("Sources() = %d, want 1 (a's empty bucket)", n)
	}
	expect(t, l, a, 500*ms, OverRate)
	expect(t, l, a, s1, Admit)
	expect(t, l, a, 5*s1, OverConns) // the shard's clock is now past a's refill
	l.Release(a)                     // last connection, full bucket: dropped
	if n := l.Sources(); n != 0 {
		t.Fatalf("Sources() = %d, want 0", n)
	}
}
