package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse checks that Parse never panics and keeps its contract on any
// input: either a Config that satisfies the cross-table rules, or a
// non-empty Errors, sorted by line, whose every entry says something.
func FuzzParse(f *testing.F) {
	if ref, err := os.ReadFile(referencePath); err == nil {
		f.Add(ref)
	}
	for _, seed := range []string{
		validBase,
		"",
		"[global",
		"[[listener]]\nname = \"a\"\nbind = \"[::1]:1\"\npool = \"p\"\n[pool.p]\nbackend = [{addr = \"[::1]:2\", id = \"x\"}]\n",
		"[pool.\"a.b\"]\nhealth.rise = 0\n'q' = \"\"\"\n[x]\n\"\"\"\n",
		"listener = [1, {name = 2}]\npool = {a = {backend = [[]]}}\n",
		"t = 1979-05-27 07:32:00Z\n[[a.b]]\n[[a]]\n[a.b]\n",
		"[[listener]]\nbind = \"::1:80\"\n[pool.web]\nmaglev_table_size = 4\nhash_balance_factor = nan\n",
		"[pool.web.breaker]\ncooldown = \"10m\"\n[pool.web.health]\ninterval = \"1ms\"\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.toml", data)
		if err != nil {
			if cfg != nil {
				t.Fatal("Config returned with an error")
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			for i, e := range errs {
				if e.Msg == "" || e.File != "fuzz.toml" || e.Line < 0 {
					t.Fatalf("malformed error %#v", e)
				}
				if i > 0 && e.Line != 0 && (errs[i-1].Line == 0 || errs[i-1].Line > e.Line) {
					t.Fatalf("errors not sorted by line: %v", errs)
				}
			}
			return
		}
		if len(cfg.Listeners) == 0 {
			t.Fatal("a valid Config has no listener")
		}
		for _, l := range cfg.Listeners {
			if cfg.Pools[l.Pool] == nil {
				t.Fatalf("listener %q names missing pool %q", l.Name, l.Pool)
			}
		}
		if len(cfg.PoolNames) != len(cfg.Pools) {
			t.Fatalf("PoolNames %v does not match Pools", cfg.PoolNames)
		}
		for _, p := range cfg.Pools {
			if len(p.Backends) == 0 || !isPrime(p.MaglevTableSize) || p.MaglevTableSize < len(p.Backends) {
				t.Fatalf("invalid pool accepted: %+v", *p)
			}
		}
	})
}
