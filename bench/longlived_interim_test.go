package main

import (
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// l4lb-log's and l4lb-interim's configurations parse, with the access log
// to the instance's directory and the interval only on l4lb-interim.
func TestLLAccessLogConfigs(t *testing.T) {
	backends := []string{"10.231.2.1:9000"}
	for _, tc := range []struct {
		interval string
		want     time.Duration
	}{{"", 0}, {llInterimEvery, time.Second}} {
		cfg, err := config.Parse("l4lb.toml", []byte(llL4lbConfigLog("10.231.1.101:8000", backends, "", llAccessKeys("/run/x", tc.interval))))
		if err != nil {
			t.Fatal(err)
		}
		if l := cfg.Log; l.Access != "json" || l.AccessFile != "/run/x/"+llAccessFile || l.AccessInterval != tc.want || l.Level != "info" {
			t.Errorf("interval %q: [log] %+v", tc.interval, l)
		}
	}
}

// The note divides the idle CPU l4lb-interim adds by the connections held
// and by the lines written.
func TestInterimNote(t *testing.T) {
	sr := newLLResult("longlived", 10000)
	sr.add(sysL4lbLog, KindSubject, map[string]float64{"idle_cpu_ms_per_s": 4}, 0, nil)
	sr.add(sysL4lbInterim, KindSubject, map[string]float64{"idle_cpu_ms_per_s": 24, "interim_per_s": 10000}, 0, nil)
	note, ok := interimNote(sr, 10000)
	if !ok || !strings.Contains(note, "2.00 µs of CPU per connection per second") || !strings.Contains(note, "2.00 µs per interim line") {
		t.Fatalf("note %q", note)
	}
	if _, ok := interimNote(newLLResult("longlived", 10), 10); ok {
		t.Errorf("a note without both rows")
	}
}
