package breaker

import (
	"cmp"

	"github.com/l4lb/l4lb/pkg/config"
)

// withDefaults is c with the fields it leaves zero at l4lb's defaults
// (pkg/config's, as a file that leaves them out gets), so a test names
// only what it is about. MaxCooldown is at least Cooldown, so a test that
// sets only a long cooldown gets a breaker New accepts.
func (c Config) withDefaults() Config {
	d := config.DefaultBreaker()
	c.Failures, c.Window, c.Successes = cmp.Or(c.Failures, d.Failures), cmp.Or(c.Window, d.Window), cmp.Or(c.Successes, d.Successes)
	c.Cooldown = cmp.Or(c.Cooldown, d.Cooldown)
	c.MaxCooldown = cmp.Or(c.MaxCooldown, max(d.MaxCooldown, c.Cooldown))
	return c
}
