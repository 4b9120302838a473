package health

import (
	"cmp"

	"github.com/l4lb/l4lb/pkg/config"
)

// defaultInterval is the interval of a check that sets none: l4lb's
// default, as a file that leaves it out gets.
var defaultInterval = config.DefaultHealth().Interval

// withDefaults is c with the settings it leaves zero at l4lb's defaults
// (pkg/config's), so a test names only what it is about.
func (c Config) withDefaults() Config {
	d := config.DefaultHealth()
	c.Interval, c.Timeout = cmp.Or(c.Interval, d.Interval), cmp.Or(c.Timeout, d.Timeout)
	c.Rise, c.Fall = cmp.Or(c.Rise, d.Rise), cmp.Or(c.Fall, d.Fall)
	return c
}
