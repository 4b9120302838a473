package pick

import "time"

// weightScale is the fixed-point unit of effective weights, so that a
// ramping backend can have a fraction of its configured weight.
const weightScale = 1024

// slowStartFloor is the fraction of its weight a backend gets the moment it
// becomes usable again: enough to be tried, not enough to be flooded.
const slowStartFloor = 0.1

// clock returns the time for effectiveWeight, or the zero Time when slow
// start is off (so the hot path does not read the clock for nothing).
func (c *common) clock() time.Time {
	if c.slowStart <= 0 {
		return time.Time{}
	}
	return c.now()
}

// effectiveWeight is i's weight in units of 1/weightScale, ramped linearly
// from slowStartFloor to 1 over the slow-start window that begins when i
// became usable.
func (c *common) effectiveWeight(i int, now time.Time) int64 {
	w := int64(c.weights[i]) * weightScale
	if c.slowStart <= 0 || w == 0 {
		return w
	}
	since := c.st.UsableSince(i)
	if since.IsZero() {
		return w
	}
	elapsed := now.Sub(since)
	if elapsed >= c.slowStart {
		return w
	}
	frac := max(float64(elapsed)/float64(c.slowStart), slowStartFloor)
	return max(1, int64(float64(w)*frac))
}
