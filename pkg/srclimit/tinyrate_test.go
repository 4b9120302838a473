package srclimit

import "testing"

// A rate far below one a day is clamped to one token per maxInterval; the
// float-to-int conversion of 1e9/Rate must not overflow into "one token a
// nanosecond", which would turn a tiny rate (rate_per_source = 1e-10 is a
// valid config) into no limit at all.
func TestTinyRateIsClampedNotUnlimited(t *testing.T) {
	for _, rate := range []float64{1.5e-10, 1e-10, 1e-11, 1e-30} {
		l := mustNew(t, Config{Rate: rate})
		if l.p.interval != maxInterval || l.p.tau != maxInterval {
			t.Errorf("Rate %g: interval %d, tau %d; want both %d", rate, l.p.interval, l.p.tau, maxInterval)
		}
		a := v4(1)
		expect(t, l, a, 0, Admit)
		expect(t, l, a, 1, OverRate)
		expect(t, l, a, 1000*s1, OverRate)
		expect(t, l, a, maxInterval, Admit)
	}
}
