package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

// The l4lb-log variant runs l4lb with a JSON access log in its run
// directory, a config l4lb itself accepts.
func TestL4lbAccessLogConfig(t *testing.T) {
	spec := l4lbAccessLogSystem()
	s := placeSystem(spec, 1, 30000, false)
	s.dir = "/tmp/run/l4lb-log"
	_, err := config.Parse("l4lb.toml", []byte(l4lbConfig(s.routes, 1, "")))
	if err != nil {
		t.Fatalf("l4lb's own config: %v", err)
	}
	cfg, err := config.Parse("l4lb.toml", []byte(l4lbConfig(s.routes, 1, accessLogKeys(s))))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Access != "json" || cfg.Log.AccessFile != "/tmp/run/l4lb-log/access.log" || cfg.Log.Level != "warn" {
		t.Fatalf("log settings %+v", cfg.Log)
	}
	if !spec.optIn || !strings.Contains(spec.about, `access = "json"`) {
		t.Fatalf("l4lb-log: opt-in %v, about %q", spec.optIn, spec.about)
	}
}

// l4lb-log runs only when named.
func TestOptInSystems(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(o.systems, sysL4lbLog) || !slices.Contains(o.systems, "l4lb") {
		t.Fatalf("default systems %v: want l4lb and not %s", o.systems, sysL4lbLog)
	}
	if o, err = parseFlags([]string{"-systems", "l4lb," + sysL4lbLog}); err != nil || !slices.Equal(o.systems, []string{"l4lb", sysL4lbLog}) {
		t.Fatalf("-systems l4lb,%s: %v %v", sysL4lbLog, o.systems, err)
	}
}

func TestAccessLogNote(t *testing.T) {
	sr := &ScenarioResult{Scenario: "conn", Metrics: connScenario{}.metrics()}
	if _, ok := accessLogNote(sr); ok {
		t.Fatal("a note without both rows")
	}
	for _, v := range []struct {
		sys       string
		rate, cpu float64
	}{{"l4lb", 40000, 20}, {sysL4lbLog, 36000, 22}} {
		for range 3 {
			sr.add(v.sys, KindSubject, map[string]float64{"conn_per_s": v.rate, "cpu_us_per_conn": v.cpu}, 0, nil)
		}
	}
	note, ok := accessLogNote(sr)
	if !ok || !strings.Contains(note, "(0.90x)") || !strings.Contains(note, "+2.0 µs, +10%") {
		t.Fatalf("note %q", note)
	}
}
