package health

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every configuration error New returns.
var ErrInvalidConfig = errors.New("invalid health config")

// Defaults, as in DESIGN.md's configuration reference.
const (
	DefaultInterval = 2 * time.Second
	DefaultTimeout  = time.Second
	DefaultRise     = 2
	DefaultFall     = 3
)

// Config holds [pool.X.health]. Zero durations and counts take their
// defaults; Enabled has no default here (the config layer defaults it to
// true), and false means no check is ever made.
type Config struct {
	Enabled  bool
	Interval time.Duration
	Timeout  time.Duration
	// Rise consecutive passing checks bring a down backend up.
	Rise int
	// Fall consecutive failing checks take an up backend down.
	Fall int
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Rise == 0 {
		c.Rise = DefaultRise
	}
	if c.Fall == 0 {
		c.Fall = DefaultFall
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...))
	}
	if c.Interval < 0 {
		bad("interval %v < 0", c.Interval)
	}
	if c.Timeout < 0 {
		bad("timeout %v < 0", c.Timeout)
	}
	if c.Rise < 0 {
		bad("rise %d < 0", c.Rise)
	}
	if c.Fall < 0 {
		bad("fall %d < 0", c.Fall)
	}
	return errors.Join(errs...)
}
