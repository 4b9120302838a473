package pick

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSmoothWRRSequence(t *testing.T) {
	backends := []Backend{{ID: "a", Weight: 5}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}}
	p := mustNew(t, backends, newState(3), Config{Algorithm: WeightedRoundRobin})
	var seq strings.Builder
	for range 70 {
		seq.WriteString(backends[p.Pick(client(0), 1, nil)[0]].ID)
	}
	// nginx's smooth weighted round robin for 5:1:1.
	if want := strings.Repeat("aabacaa", 10); seq.String() != want {
		t.Errorf("sequence %s, want %s", seq.String(), want)
	}
	run, longest := 1, 1
	s := seq.String()
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			run++
		} else {
			run = 1
		}
		longest = max(longest, run)
	}
	if longest >= 5 {
		t.Errorf("longest run %d, want < 5", longest)
	}
}

func TestSmoothWRRSkipsUnusable(t *testing.T) {
	backends := []Backend{{ID: "a", Weight: 5}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}}
	st := newState(3)
	st.down[0].Store(true)
	p := mustNew(t, backends, st, Config{Algorithm: WeightedRoundRobin})
	var seq strings.Builder
	for range 6 {
		seq.WriteString(backends[p.Pick(client(0), 1, nil)[0]].ID)
	}
	if seq.String() != "bcbcbc" {
		t.Errorf("sequence %s, want bcbcbc", seq.String())
	}
	// Fallbacks are the runners-up by current weight.
	st.down[0].Store(false)
	p = mustNew(t, backends, st, Config{Algorithm: WeightedRoundRobin})
	// After the first pick currents are a=-2 b=1 c=1: fallbacks b then c.
	if got := p.Pick(client(0), 3, nil); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("Pick = %v, want [0 1 2]", got)
	}
}

// trackedShares runs picks against a State whose Active counts grow with
// every pick (connections that stay open), and returns each backend's share.
func trackedShares(t *testing.T, p Picker, st *fakeState, picks int) []float64 {
	counts := make([]int, len(st.active))
	for range picks {
		b := p.Pick(client(0), 1, nil)[0]
		st.active[b].Add(1)
		counts[b]++
	}
	shares := make([]float64, len(counts))
	for i, c := range counts {
		shares[i] = float64(c) / float64(picks)
	}
	return shares
}

func TestWeightsHonoured(t *testing.T) {
	const picks = 100_000
	backends := []Backend{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 3}, {ID: "d", Weight: 4}, {ID: "z", Weight: 0}}
	for _, alg := range []string{WeightedRoundRobin, LeastConn, P2C} {
		t.Run(alg, func(t *testing.T) {
			st := newState(len(backends))
			r := rand.New(rand.NewPCG(5, 6))
			p := mustNew(t, backends, st, Config{Algorithm: alg, Rand: r.Uint64})
			for i, share := range trackedShares(t, p, st, picks) {
				want := float64(backends[i].Weight) / 10
				if math.Abs(share-want) > 0.01*want {
					t.Errorf("%s: share %.4f, want %.4f ± 1%%", backends[i].ID, share, want)
				}
			}
		})
	}
}

func TestLeastConnTiesUnbiased(t *testing.T) {
	// Every backend always has the same load: the winner must be uniform,
	// not the first index. Chi-square with 9 degrees of freedom; 27.9 is
	// the 0.999 quantile.
	const picks, n = 100_000, 10
	st := newState(n)
	for i := range n {
		st.active[i].Store(7)
	}
	r := rand.New(rand.NewPCG(1, 2))
	p := mustNew(t, equalBackends(n), st, Config{Algorithm: LeastConn, Rand: r.Uint64})
	counts := make([]int, n)
	for range picks {
		counts[p.Pick(client(0), 1, nil)[0]]++
	}
	chi2 := 0.0
	for _, c := range counts {
		d := float64(c) - picks/n
		chi2 += d * d / (picks / n)
	}
	if chi2 > 27.9 {
		t.Errorf("chi-square %.1f > 27.9: counts %v", chi2, counts)
	}
}

func TestLeastConnPrefersLeastLoaded(t *testing.T) {
	st := newState(4)
	for i, a := range []int64{5, 2, 9, 3} {
		st.active[i].Store(a)
	}
	p := mustNew(t, equalBackends(4), st, Config{Algorithm: LeastConn})
	if got := p.Pick(client(0), 4, nil); !slices.Equal(got, []int{1, 3, 0, 2}) {
		t.Errorf("Pick = %v, want [1 3 0 2]", got)
	}
	if got := p.Order(client(0), nil); !slices.Equal(got, []int{1, 3, 0, 2}) {
		t.Errorf("Order = %v, want [1 3 0 2]", got)
	}
}

func TestSlowStartRamp(t *testing.T) {
	// Backend 0 of three equal ones became usable at t0; with a 10s window
	// its effective weight is 10% at first, 50% at 5s, 100% from 10s, and
	// its share is weight/(weight+2).
	const window = 10 * time.Second
	t0 := time.Unix(1_000_000, 0)
	for _, alg := range []string{WeightedRoundRobin, LeastConn, P2C} {
		for _, tc := range []struct {
			after time.Duration
			frac  float64
		}{
			{0, slowStartFloor},
			{500 * time.Millisecond, slowStartFloor},
			{5 * time.Second, 0.5},
			{window, 1},
			{time.Hour, 1},
		} {
			t.Run(alg+"/"+tc.after.String(), func(t *testing.T) {
				st := newState(3)
				st.since[0].Store(t0.UnixNano())
				now := t0.Add(tc.after)
				r := rand.New(rand.NewPCG(7, 8))
				p := mustNew(t, equalBackends(3), st, Config{Algorithm: alg, SlowStart: window, Now: func() time.Time { return now }, Rand: r.Uint64})
				share := trackedShares(t, p, st, 20_000)[0]
				want := tc.frac / (tc.frac + 2)
				if math.Abs(share-want) > 0.01 {
					t.Errorf("share %.4f, want %.4f ± 0.01", share, want)
				}
			})
		}
	}
}

func TestSlowStartOffOrFromStart(t *testing.T) {
	// A zero UsableSince means usable from the start: no ramp, even with
	// slow start on; and slow start 0 never reads the clock.
	st := newState(3)
	p := mustNew(t, equalBackends(3), st, Config{Algorithm: WeightedRoundRobin, SlowStart: time.Minute, Now: func() time.Time { return time.Unix(5, 0) }})
	if share := trackedShares(t, p, st, 3000)[0]; math.Abs(share-1.0/3) > 0.001 {
		t.Errorf("share %.4f, want 1/3", share)
	}
	st = newState(3)
	st.since[0].Store(time.Unix(5, 0).UnixNano())
	p = mustNew(t, equalBackends(3), st, Config{Algorithm: LeastConn, Now: func() time.Time { panic("clock read with slow start off") }})
	if share := trackedShares(t, p, st, 3000)[0]; math.Abs(share-1.0/3) > 0.001 {
		t.Errorf("share %.4f, want 1/3", share)
	}
}
