package health

import "github.com/l4lb/l4lb/pkg/config"

// defaultInterval is the interval of a check that sets none: l4lb's
// default, as a file that leaves it out gets.
var defaultInterval = config.DefaultHealth().Interval

// withDefaults is c with the settings it leaves zero at l4lb's defaults
// (pkg/config's), so a test names only what it is about.
func (c Config) withDefaults() Config {
	d := config.DefaultHealth()
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.Rise == 0 {
		c.Rise = d.Rise
	}
	if c.Fall == 0 {
		c.Fall = d.Fall
	}
	return c
}
