package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-scenario", "bulk,ping", "-systems", "direct,haproxy"})
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 3 || o.runTime != time.Second || o.idleCap != 2000 {
		t.Errorf("quick profile = %d rounds, %v, cap %d", o.rounds, o.runTime, o.idleCap)
	}
	if len(o.scenarios) != 2 || o.scenarios[1] != "ping" || len(o.systems) != 2 {
		t.Errorf("selection = %v %v", o.scenarios, o.systems)
	}
	o, err = parseFlags(nil)
	if err != nil || o.rounds != 5 || len(o.scenarios) != len(scenarioCatalog()) {
		t.Errorf("full profile = %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-scenario", "nope"}, {"-systems", "envoy"}, {"-port-base", "80"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%v) accepted", bad)
		}
	}
}

// -baseline adds l4lb-base to the run, once, whatever -systems says; the
// run then takes it right after l4lb (catalog order), and without it the
// system refuses to start with the reason.
func TestBaselineJoinsTheRun(t *testing.T) {
	o, err := parseFlags([]string{"-baseline", "/tmp/old-l4lb", "-systems", "l4lb,nginx"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"l4lb", "nginx", sysL4lbBase}; !slices.Equal(o.systems, want) {
		t.Fatalf("systems %v, want %v", o.systems, want)
	}
	o, err = parseFlags([]string{"-baseline", "/tmp/old-l4lb", "-systems", "l4lb," + sysL4lbBase})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"l4lb", sysL4lbBase}; !slices.Equal(o.systems, want) {
		t.Fatalf("systems %v, want %v", o.systems, want)
	}
	names := systemNames()
	if i := slices.Index(names, "l4lb"); i < 0 || i+1 >= len(names) || names[i+1] != sysL4lbBase {
		t.Fatalf("catalog order %v: %s must follow l4lb", names, sysL4lbBase)
	}
	if slices.Contains(defaultSystemNames(), sysL4lbBase) {
		t.Fatalf("%s runs by default", sysL4lbBase)
	}
	h := &harness{}
	if _, err := h.baselineBinary(); err == nil || !strings.Contains(err.Error(), "-baseline") {
		t.Fatalf("no -baseline: error %v, want one naming -baseline", err)
	}
}

// -rotate starts each round one system later and keeps every system in
// every round; without it the file's order stands.
func TestSystemsInRoundRotates(t *testing.T) {
	var sys []*system
	for _, name := range []string{"direct", "l4lb", "haproxy", "nginx"} {
		sys = append(sys, &system{spec: systemSpec{name: name}})
	}
	names := func(ss []*system) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.spec.name)
		}
		return strings.Join(out, " ")
	}
	for r, want := range []string{"direct l4lb haproxy nginx", "l4lb haproxy nginx direct", "haproxy nginx direct l4lb", "nginx direct l4lb haproxy", "direct l4lb haproxy nginx"} {
		if got := names(systemsInRound(sys, r, true)); got != want {
			t.Errorf("round %d rotated: %s, want %s", r, got, want)
		}
		if got := names(systemsInRound(sys, r, false)); got != "direct l4lb haproxy nginx" {
			t.Errorf("round %d unrotated: %s", r, got)
		}
	}
	if names(sys) != "direct l4lb haproxy nginx" {
		t.Errorf("rotating changed the file's order: %s", names(sys))
	}
}
