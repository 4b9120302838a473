package config

import (
	"fmt"
	"strings"
	"testing"
)

// maglevFile is a file with one Maglev pool of n backends and, when size
// is not 0, maglev_table_size = size.
func maglevFile(n, size int, algorithm string) string {
	var b strings.Builder
	b.WriteString("[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:8080\"\npool = \"p\"\n\n[pool.p]\n")
	fmt.Fprintf(&b, "algorithm = %q\n", algorithm)
	if size != 0 {
		fmt.Fprintf(&b, "maglev_table_size = %d\n", size)
	}
	for i := range n {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = \"10.0.%d.%d:80\"\n", i/250, i%250+1)
	}
	return b.String()
}

// A Maglev pool under 100 slots per backend gets one warning, on its key
// and line, naming the prime to use; one at or over it, a small pool at
// the default size, and a pool of another algorithm get none.
func TestAdviceOnMaglevTableSize(t *testing.T) {
	cases := []struct {
		name      string
		file      string
		want      string // "" for no advice
		wantLine  int
		wantPrime string
	}{
		{"1000 backends at the default size", maglevFile(1000, 0, AlgorithmMaglev), "65537 slots for 1000 backends", 6, "e.g. 100003"},
		{"1000 backends, size written", maglevFile(1000, 65537, AlgorithmMaglev), "65537 slots for 1000 backends", 8, "e.g. 100003"},
		{"1000 backends at 655373", maglevFile(1000, 655373, AlgorithmMaglev), "", 0, ""},
		{"3 backends at the default size", maglevFile(3, 0, AlgorithmMaglev), "", 0, ""},
		{"1000 backends, round robin", maglevFile(1000, 0, AlgorithmRoundRobin), "", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("f.toml", []byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			adv := cfg.Advice()
			if tc.want == "" {
				if len(adv) != 0 {
					t.Fatalf("advice %v, want none", adv)
				}
				return
			}
			if len(adv) != 1 {
				t.Fatalf("advice %v, want one", adv)
			}
			a := adv[0]
			if a.Key != "pool.p.maglev_table_size" || a.Line != tc.wantLine || !strings.Contains(a.Msg, tc.want) || !strings.Contains(a.Msg, tc.wantPrime) {
				t.Fatalf("advice %q (key %s, line %d), want key pool.p.maglev_table_size, line %d, %q and %q", a.Error(), a.Key, a.Line, tc.wantLine, tc.want, tc.wantPrime)
			}
		})
	}
}

// Past 100,000 backends the rule asks for more than the largest table
// allowed: the advice names that one, and at it there is none.
func TestAdviceOnMaglevTableSizePastTheLargest(t *testing.T) {
	p := &Pool{Algorithm: AlgorithmMaglev, MaglevTableSize: 65537, Backends: make([]Backend, 200_000)}
	c := &collector{}
	adviseMaglevSize(c, "pool.p.maglev_table_size", p)
	if len(c.errs) != 1 || !strings.Contains(c.errs[0].Msg, fmt.Sprintf("the largest size allowed, %d", MaxMaglevTableSize)) {
		t.Fatalf("advice %v, want one naming %d", c.errs, MaxMaglevTableSize)
	}
	p.MaglevTableSize = MaxMaglevTableSize
	c = &collector{}
	adviseMaglevSize(c, "pool.p.maglev_table_size", p)
	if len(c.errs) != 0 {
		t.Fatalf("advice %v at the largest size, want none", c.errs)
	}
}

// Interim lines or lines at connect asked for with the access log off get
// a warning each, on its key and line; with the log on, or the keys at
// their defaults, none.
func TestAdviceOnAccessRecordsWithoutAnAccessLog(t *testing.T) {
	base := maglevFile(1, 0, AlgorithmRoundRobin)
	cases := []struct {
		name, log string
		want      []string // keys warned of, in order
	}{
		{"off, both asked for", "[log]\naccess_interval = \"10s\"\naccess_on_connect = true\n", []string{"log.access_interval", "log.access_on_connect"}},
		{"off by default, interval", "[log]\naccess_interval = \"1m\"\n", []string{"log.access_interval"}},
		{"text, both", "[log]\naccess = \"text\"\naccess_interval = \"10s\"\naccess_on_connect = true\n", nil},
		{"off, nothing asked", "[log]\naccess = \"off\"\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("f.toml", []byte(tc.log+base))
			if err != nil {
				t.Fatal(err)
			}
			adv := cfg.Advice()
			if len(adv) != len(tc.want) {
				t.Fatalf("advice %v, want on %v", adv, tc.want)
			}
			for i, a := range adv {
				if a.Key != tc.want[i] || a.Line != i+2 || !strings.Contains(a.Msg, `access = "off"`) {
					t.Fatalf("advice %q (key %s, line %d), want key %s on line %d naming access = \"off\"", a.Error(), a.Key, a.Line, tc.want[i], i+2)
				}
			}
		})
	}
}
