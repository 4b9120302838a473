package pick

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
)

// countingState counts the Usable calls made of a fakeState.
type countingState struct {
	*fakeState
	usableCalls atomic.Int64
}

func (s *countingState) Usable(i int) bool {
	s.usableCalls.Add(1)
	return s.fakeState.Usable(i)
}

// hashingVariants are the hashing pickers whose picks walk their
// structure, bounded-load consistent hashing included.
var hashingVariants = []struct {
	name   string
	alg    string
	factor float64
}{
	{IPHash, IPHash, 0},
	{ConsistentHash, ConsistentHash, 0},
	{"consistent-hash-bounded", ConsistentHash, 1.25},
	{Maglev, Maglev, 0},
}

// usableInOrder is the reference pick: the first n usable backends of the
// client's preference order.
func usableInOrder(p Picker, st State, i, n int) []int {
	var want []int
	for _, b := range p.Order(client(i), nil) {
		if len(want) < n && st.Usable(b) {
			want = append(want, b)
		}
	}
	return want
}

// TestHashingPickCostAtScale: in a pool of 4,000 with all but 3 backends
// down, a hashing pick asks State about a bounded number of backends
// (what the picker polls, plus a few per backend it returns), not about
// the thousands a walk used to meet; it returns the 3 in the client's
// preference order, and allocates nothing.
func TestHashingPickCostAtScale(t *testing.T) {
	const n = 4000
	// Unnotified, a picker polls pollBudget backends per pick for each
	// structure it keeps (the usable mask, bounded load's totals).
	const bound = 2*pollBudget + 4*3
	for _, v := range hashingVariants {
		for _, notified := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/notified=%v", v.name, notified), func(t *testing.T) {
				st := &countingState{fakeState: allButThreeDown(n)}
				p := mustNew(t, equalBackends(n), st, Config{Algorithm: v.alg, HashBalanceFactor: v.factor, Notified: notified})
				dst := make([]int, 0, 3)
				for i := range 50 {
					st.usableCalls.Store(0)
					dst = p.Pick(client(i), 3, dst[:0])
					calls := st.usableCalls.Load()
					if calls > bound {
						t.Fatalf("client %d: %d Usable calls for one pick, want at most %d", i, calls, bound)
					}
					if want := usableInOrder(p, st.fakeState, i, 3); !slices.Equal(dst, want) {
						t.Fatalf("client %d: picked %v, want %v", i, dst, want)
					}
				}
				if allocs := testing.AllocsPerRun(100, func() { dst = p.Pick(client(7), 3, dst[:0]) }); allocs != 0 {
					t.Errorf("%v allocations per pick", allocs)
				}
			})
		}
	}
}

// TestHashingPickFollowsUsability: in a pool larger than pollBudget (so
// the pickers keep a mask of the usable backends), a notified picker's
// next pick after Changed sees a backend go down or come back, and an
// unnotified one sees it within the picks its polling takes to reach the
// backend; every pick returns the usable backends in preference order.
func TestHashingPickFollowsUsability(t *testing.T) {
	const n, clients = 100, 50
	pollRound := (n + pollBudget - 1) / pollBudget
	for _, v := range hashingVariants {
		for _, notified := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/notified=%v", v.name, notified), func(t *testing.T) {
				st := newState(n)
				p := mustNew(t, equalBackends(n), st, Config{Algorithm: v.alg, HashBalanceFactor: v.factor, Notified: notified})
				hook := p.(Notified)
				// The backend that client 0 prefers flaps.
				owner := p.Order(client(0), nil)[0]
				for round := range 6 {
					st.down[owner].Store(round%2 == 0)
					settle := 0
					if notified {
						hook.Changed(owner)
					} else {
						// Picks of other clients, enough for polling to
						// come round to owner.
						for i := range pollRound {
							p.Pick(client(1000+i), 3, nil)
						}
						settle = pollRound
					}
					for i := range clients {
						if got, want := p.Pick(client(i), 3, nil), usableInOrder(p, st, i, 3); !slices.Equal(got, want) {
							t.Fatalf("round %d (owner down %v), %d picks after the change: client %d got %v, want %v", round, round%2 == 0, settle, i, got, want)
						}
					}
				}
			})
		}
	}
}
