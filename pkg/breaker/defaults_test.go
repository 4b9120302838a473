package breaker

import "github.com/l4lb/l4lb/pkg/config"

// withDefaults is c with the fields it leaves zero at l4lb's defaults
// (pkg/config's, as a file that leaves them out gets), so a test names
// only what it is about. MaxCooldown is at least Cooldown, as a pool's
// breaker with a long cooldown and the default max_cooldown could not be.
func (c Config) withDefaults() Config {
	d := config.DefaultBreaker()
	if c.Failures == 0 {
		c.Failures = d.Failures
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.Cooldown == 0 {
		c.Cooldown = d.Cooldown
	}
	if c.MaxCooldown == 0 {
		c.MaxCooldown = max(d.MaxCooldown, c.Cooldown)
	}
	if c.Successes == 0 {
		c.Successes = d.Successes
	}
	return c
}
