package pick

import (
	"time"
)

// common is what every picker needs: the backends' static weights and the
// pool's live state.
type common struct {
	st        State
	weights   []int32
	slowStart time.Duration
	now       func() time.Time
	rand      func() uint64
	key       keyer
}

// usable reports whether i may be picked: weight > 0 and usable now.
func (c *common) usable(i int) bool { return c.weights[i] > 0 && c.st.Usable(i) }

// intn returns a random integer in [0, n).
func (c *common) intn(n int) int { return int(c.rand() % uint64(n)) }

// scan appends, in index order from start and wrapping, backends with
// weight > 0 (and usable, if usableOnly) that are not yet chosen, until
// len(dst) reaches want.
func (c *common) scan(start, from, want int, usableOnly bool, dst []int) []int {
	n := len(c.weights)
	for k := range n {
		if len(dst) >= want {
			break
		}
		i := start + k
		if i >= n {
			i -= n
		}
		if c.weights[i] == 0 || (usableOnly && !c.st.Usable(i)) || contains(dst[from:], i) {
			continue
		}
		dst = append(dst, i)
	}
	return dst
}

// randomUsable draws up to tries uniform indices and returns the first that
// is usable and not in chosen, or -1. Rejection sampling keeps the draw
// uniform over the usable backends, which a scan from a random start would
// not be (the backend after a run of unusable ones would be favoured).
func (c *common) randomUsable(tries int, chosen []int) int {
	for range tries {
		i := c.intn(len(c.weights))
		if c.usable(i) && !contains(chosen, i) {
			return i
		}
	}
	return -1
}

// weighted counts the backends of weight > 0.
func (c *common) weighted() int {
	n := 0
	for _, w := range c.weights {
		if w > 0 {
			n++
		}
	}
	return n
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
