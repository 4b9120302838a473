package main

import (
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
