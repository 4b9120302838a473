package config

// Advice lists what a valid file could do better: nothing in it stops l4lb
// from serving, so check prints these as warnings (exit 0) and run logs
// them, each with its key and line as an Error has. Sorted by line.
func (cfg *Config) Advice() Errors {
	c := &collector{file: cfg.file, pos: cfg.pos}
	for _, name := range cfg.PoolNames {
		adviseMaglevSize(c, "pool."+name+".maglev_table_size", cfg.Pools[name])
	}
	adviseAccessRecords(c, cfg.Log)
	c.errs.sort()
	return c.errs
}

// maglevSlotsPerBackend is the Maglev paper's rule for a table's size:
// about 100 slots per backend keep each backend's share within about 1%
// of the others' and, at a change, the keys moved between backends that
// stay few. Measured with pkg/hashring at 1,000 backends: removing 1% of
// them moved 3.3% of the keys at the default 65,537 slots, 1.6% at
// 655,373 (docs/fleet.md, "Maglev tables for a fleet's pools").
const maglevSlotsPerBackend = 100

// adviseMaglevSize warns of a Maglev pool whose table is smaller than
// maglevSlotsPerBackend slots per backend of the file, and names the prime
// to use. The size must be chosen, never derived from the backend count:
// a new size remaps every key, on every instance of a fleet at once.
func adviseMaglevSize(c *collector, key string, p *Pool) {
	if p.Algorithm != AlgorithmMaglev || len(p.Backends) == 0 {
		return
	}
	want := maglevSlotsPerBackend * len(p.Backends)
	if p.MaglevTableSize >= min(want, MaxMaglevTableSize) {
		return
	}
	if want > MaxMaglevTableSize {
		c.add(key, "%d slots for %d backends is fewer than %d per backend, so their shares of the keys are uneven and a change of backends moves more keys than it must; set it to the largest size allowed, %d, once (a new size remaps every key)",
			p.MaglevTableSize, len(p.Backends), maglevSlotsPerBackend, MaxMaglevTableSize)
		return
	}
	c.add(key, "%d slots for %d backends is fewer than %d per backend, so their shares of the keys are uneven and a change of backends moves more keys than it must; set it to a prime of at least %d%s, once (a new size remaps every key)",
		p.MaglevTableSize, len(p.Backends), maglevSlotsPerBackend, want, primeHint(want))
}

// adviseAccessRecords warns of access-log records asked for (interim
// lines, lines at connect) while the access log is off: the keys are
// valid, and quietly do nothing.
func adviseAccessRecords(c *collector, l Log) {
	if l.Access != AccessOff {
		return
	}
	if l.AccessInterval > 0 {
		c.add("log.access_interval", "interim lines every %v are asked for, but access = %q writes no access log: set access to \"text\", \"json\" or \"syslog\", or remove the key", l.AccessInterval, AccessOff)
	}
	if l.AccessOnConnect {
		c.add("log.access_on_connect", "lines at connect are asked for, but access = %q writes no access log: set access to \"text\", \"json\" or \"syslog\", or remove the key", AccessOff)
	}
}
