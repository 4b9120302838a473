package main

import "testing"

func TestParseStat(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := "1234 (we) ird (name) S 77 1234 1234 0 -1 4194560 100 0 0 0 250 125 0 0 20 0 3 0 100 0 0\n"
	got := parseStat([]byte(line))
	if got.ppid != 77 || got.utime != 250 || got.stime != 125 {
		t.Fatalf("parseStat = %+v, want ppid 77 utime 250 stime 125", got)
	}
}

func TestParseSteal(t *testing.T) {
	b := []byte("cpu  4320 0 2124 53577 198 0 27 9 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if got := parseSteal(b); got != 9 {
		t.Fatalf("parseSteal = %d, want 9", got)
	}
	if got := parseSteal([]byte("intr 1 2 3\n")); got != 0 {
		t.Fatalf("parseSteal without a cpu line = %d, want 0", got)
	}
}

func TestPlanLayout(t *testing.T) {
	l := planLayout(2, true)
	if !l.pinned || cpuList(l.loadgen) != "0" || cpuList(l.backends) != "0" || cpuList(l.proxy) != "1" {
		t.Errorf("2 CPUs: %+v, want load 0, backends 0, proxy 1", l)
	}
	l = planLayout(8, true)
	if cpuList(l.loadgen) != "0" || cpuList(l.backends) != "1" || cpuList(l.proxy) != "2,3,4,5,6,7" {
		t.Errorf("8 CPUs: %+v", l)
	}
	for _, l := range []cpuLayout{planLayout(1, true), planLayout(4, false)} {
		if l.pinned || len(l.proxy) != len(l.loadgen) {
			t.Errorf("unpinned layout expected, got %+v", l)
		}
	}
}
