package breaker

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every configuration error New returns.
var ErrInvalidConfig = errors.New("invalid breaker config")

// Default values, the same as DESIGN.md's configuration reference. A zero
// field in Config takes its default.
const (
	DefaultFailures    = 3
	DefaultWindow      = 120 * time.Second
	DefaultCooldown    = 30 * time.Second
	DefaultMaxCooldown = 5 * time.Minute
	DefaultSuccesses   = 1
)

// Config holds the per-pool breaker settings ([pool.X.breaker]).
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

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	if c.Failures == 0 {
		c.Failures = DefaultFailures
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.MaxCooldown == 0 {
		c.MaxCooldown = max(DefaultMaxCooldown, c.Cooldown)
	}
	if c.Successes == 0 {
		c.Successes = DefaultSuccesses
	}
	return c
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
