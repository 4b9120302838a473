package breaker

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every configuration error New returns.
var ErrInvalidConfig = errors.New("invalid breaker config")

// Config holds the per-pool breaker settings ([pool.X.breaker]). It has
// no defaults of its own: every field but MinRatio and MinVolume must be
// set, and New refuses a zero Failures, Window, Cooldown or Successes, or
// a MaxCooldown below Cooldown. The defaults of the keys are pkg/config's,
// which fills in what the file leaves out.
type Config struct {
	// Failures is how many failed dials within Window trip the breaker.
	// Up to 64 the count is exact; above it failures are counted in the
	// 64 buckets of Window/64 that also keep the MinRatio volume, so a
	// failure counts for at least Window − Window/64 and never for Window
	// or longer (window.go: memory stays bounded whatever the setting).
	Failures int
	// Window is the span of the sliding failure window.
	Window time.Duration
	// MinRatio, when > 0, also requires this share of failed dials among at
	// least MinVolume dials in the window. The ratio is kept in 64 buckets
	// of Window/64, so its edge is that coarse (see Failures for the count).
	MinRatio  float64
	MinVolume int
	// Cooldown is how long a tripped breaker waits before its first probe.
	Cooldown time.Duration
	// MaxCooldown is a hard ceiling for the doubled (and jittered) cooldown.
	MaxCooldown time.Duration
	// Successes is how many post-trip successes close the breaker.
	Successes int
}

// validate reports every impossible value at once.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...))
	}
	if c.Failures < 1 {
		bad("failures %d < 1", c.Failures)
	}
	if c.Window <= 0 {
		bad("window %v <= 0", c.Window)
	}
	if c.MinRatio < 0 || c.MinRatio > 1 {
		bad("min_ratio %v outside [0, 1]", c.MinRatio)
	}
	if c.MinVolume < 0 {
		bad("min_volume %d < 0", c.MinVolume)
	}
	if c.Cooldown <= 0 {
		bad("cooldown %v <= 0", c.Cooldown)
	}
	if c.MaxCooldown < c.Cooldown {
		bad("max_cooldown %v < cooldown %v", c.MaxCooldown, c.Cooldown)
	}
	if c.Successes < 1 {
		bad("successes %d < 1", c.Successes)
	}
	return errors.Join(errs...)
}
