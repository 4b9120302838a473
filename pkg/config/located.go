package config

// PoolError reports err, found while building pool name from this
// configuration, as an invalid configuration located at the pool's table,
// so that a problem only the pool's own code can see still comes out of
// `l4lb check` with its key and line like every other.
func (cfg *Config) PoolError(name string, err error) error {
	key := joinKey("pool", name)
	line := 0
	if p := cfg.Pools[name]; p != nil {
		line = p.Line
	}
	return Errors{{File: cfg.file, Line: line, Key: key, Msg: "run cannot build this pool: " + err.Error()}}
}
