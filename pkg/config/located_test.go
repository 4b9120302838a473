package config

import (
	"errors"
	"testing"
)

func TestPoolErrorIsLocatedAtThePool(t *testing.T) {
	cfg := mustParse(t, validBase+"[pool.\"a.b\"]\nretries = 1\n[[pool.\"a.b\".backend]]\naddr = \"127.0.0.1:9002\"\n")
	err := cfg.PoolError("a.b", errors.New("ring too large"))
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("PoolError is not ErrInvalid: %v", err)
	}
	if want := `test.toml:8: pool."a.b": run cannot build this pool: ring too large`; err.Error() != want {
		t.Errorf("PoolError = %q, want %q", err, want)
	}
}
