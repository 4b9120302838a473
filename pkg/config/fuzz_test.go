package config

import (
	"errors"
	"net/netip"
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
		listeners([]string{`"0.0.0.0:80"`, `"[::]:80"`, `"127.0.0.1:80"`}, `"127.0.0.1:80"`, `"[::1]:81"`),
		"[[listener]]\nname = \"a\"\nbind = \"[::]:1\"\npool = \"p\"\n[pool.p]\nalgorithm = \"consistent-hash\"\nring_vnodes = 9000\nbackend = [{addr = \"300.1.2.3:1\", weight = 0}, {addr = \"[::1]:1\", weight = 256}]\n",
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
		var binds []netip.AddrPort
		for _, l := range cfg.Listeners {
			ap, err := parseAddr(l.Bind, roleListen)
			if err != nil {
				t.Fatalf("listener %q: bad bind accepted: %v", l.Name, err)
			}
			for _, other := range binds {
				if bindsCollide(ap, other) {
					t.Fatalf("colliding binds %s and %s accepted", ap, other)
				}
			}
			binds = append(binds, ap)
		}
		for _, p := range cfg.Pools {
			if len(p.Backends) == 0 || !isPrime(p.MaglevTableSize) || p.MaglevTableSize < len(p.Backends) {
				t.Fatalf("invalid pool accepted: %+v", *p)
			}
			weight := 0
			for _, b := range p.Backends {
				weight += b.Weight
				ap, err := parseAddr(b.Addr, roleDial)
				if err != nil {
					t.Fatalf("pool %s: bad backend accepted: %v", p.Name, err)
				}
				for _, bind := range binds {
					if dialReaches(bind, ap, isLoopback) {
						t.Fatalf("pool %s: backend %s is l4lb's own %s", p.Name, ap, bind)
					}
				}
			}
			if weight == 0 {
				t.Fatalf("pool %s accepted with every weight 0", p.Name)
			}
			if p.Algorithm == AlgorithmConsistentHash && weight*p.RingVnodes > MaxRingPoints {
				t.Fatalf("pool %s: ring of %d points accepted", p.Name, weight*p.RingVnodes)
			}
		}
	})
}
