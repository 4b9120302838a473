package health

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every configuration error New returns.
var ErrInvalidConfig = errors.New("invalid health config")

// Config holds [pool.X.health]. It has no defaults of its own (pkg/config's
// fill in what the file leaves out): with Enabled, New refuses an Interval
// or Timeout that is not above 0 and a Rise or Fall below 1. Enabled false
// means no check is ever made, and then nothing else need be set.
type Config struct {
	Enabled  bool
	Interval time.Duration
	Timeout  time.Duration
	// Rise consecutive passing checks bring a down backend up.
	Rise int
	// Fall consecutive failing checks take an up backend down.
	Fall int
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
	if c.Enabled {
		// Checks are made: every setting is needed.
		if c.Interval == 0 {
			bad("interval 0s: an enabled check needs one")
		}
		if c.Timeout == 0 {
			bad("timeout 0s: an enabled check needs one")
		}
		if c.Rise == 0 {
			bad("rise 0: an enabled check needs one")
		}
		if c.Fall == 0 {
			bad("fall 0: an enabled check needs one")
		}
	}
	return errors.Join(errs...)
}
