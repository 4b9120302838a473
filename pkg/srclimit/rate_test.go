package srclimit

import (
	"math"
	"testing"
)

func TestBurstThenRefill(t *testing.T) {
	l := mustNew(t, Config{Rate: 10, Burst: 5}) // a token every 100ms
	a := v4(1)
	if got := admitN(l, a, 0, 8); got[Admit] != 5 || got[OverRate] != 3 {
		t.Fatalf("burst at t=0: %v, want 5 admitted, 3 over rate", got)
	}
	expect(t, l, a, 100*ms-1, OverRate)
	expect(t, l, a, 100*ms, Admit)
	expect(t, l, a, 100*ms, OverRate)
	// 350ms later: 3 tokens (3.5 earned, half a token carried over).
	if got := admitN(l, a, 450*ms, 5); got[Admit] != 3 {
		t.Fatalf("at 450ms: %v, want 3 admitted", got)
	}
	expect(t, l, a, 500*ms-1, OverRate)
	expect(t, l, a, 500*ms, Admit)
	// Long idle: the bucket holds Burst tokens, not more.
	if got := admitN(l, a, 100*s1, 10); got[Admit] != 5 {
		t.Fatalf("after idling: %v, want 5 admitted", got)
	}
	// A steady 10/s for 10s: every call admitted.
	for i := range 100 {
		expect(t, l, a, 100*s1+int64(i+1)*100*ms, Admit)
	}
}

func TestDefaultBurst(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want int
	}{{0.5, 1}, {1, 1}, {2.5, 3}, {20, 20}} {
		l := mustNew(t, Config{Rate: c.rate})
		if got := admitN(l, v4(1), 0, 50); got[Admit] != c.want {
			t.Errorf("Rate %v: burst admitted %d, want %d", c.rate, got[Admit], c.want)
		}
	}
}

func TestFractionalRate(t *testing.T) {
	l := mustNew(t, Config{Rate: 0.5}) // one every 2s, burst 1
	a := v4(1)
	expect(t, l, a, 0, Admit)
	expect(t, l, a, s1, OverRate)
	expect(t, l, a, 2*s1-1, OverRate)
	expect(t, l, a, 2*s1, Admit)
	expect(t, l, a, 3*s1, OverRate)
	expect(t, l, a, 4*s1, Admit)

	l = mustNew(t, Config{Rate: 0.25, Burst: 2}) // one every 4s
	if got := admitN(l, a, 0, 3); got[Admit] != 2 {
		t.Fatalf("burst 2: %v", got)
	}
	expect(t, l, a, 4*s1-1, OverRate)
	expect(t, l, a, 4*s1, Admit)
	expect(t, l, a, 8*s1, Admit)
	expect(t, l, a, 8*s1, OverRate)
}

func TestRefusalByRateTakesNoToken(t *testing.T) {
	l := mustNew(t, Config{Rate: 1, Burst: 2})
	a := v4(1)
	admitN(l, a, 0, 2)
	// Hammering an empty bucket does not push its refill back.
	if got := admitN(l, a, s1-1, 1000); got[OverRate] != 1000 {
		t.Fatalf("empty bucket: %v", got)
	}
	expect(t, l, a, s1, Admit)
	if got := admitN(l, a, 3*s1, 1000); got[Admit] != 2 {
		t.Fatalf("at 3s after refusals: %v, want the 2 tokens earned", got)
	}
}

func TestClockNeverGoesBack(t *testing.T) {
	l := mustNew(t, Config{Rate: 1, Burst: 1})
	a := v4(1)
	expect(t, l, a, 5*s1, Admit)
	// A caller whose clock reading is older is taken at the shard's time:
	// no token is earned by going back, none is lost.
	expect(t, l, a, 4*s1, OverRate)
	expect(t, l, a, 6*s1, Admit)
}

func TestExtremeConfigs(t *testing.T) {
	for _, cfg := range []Config{
		{Rate: 1e-30, Burst: math.MaxInt},
		{Rate: 1e30},
		{Rate: math.SmallestNonzeroFloat64, Burst: math.MaxInt, MaxConns: math.MaxInt}, // burst 1 would admit once: a token per maxInterval
		{Rate: math.NaN(), MaxConns: 1},
		{Rate: math.Inf(1), MaxConns: 1},
	} {
		l := mustNew(t, cfg)
		for i := range 5 {
			if v := l.Admit(v4(1), int64(i)*1000*s1); v != Admit {
				t.Errorf("%+v: call %d: %v", cfg, i, v)
			}
			l.Release(v4(1))
		}
		check(t, l)
	}
}
