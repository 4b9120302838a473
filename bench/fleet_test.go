package main

import (
	"testing"
	"time"
)

// -scenario fleet runs alone, with its own sizes, and its own default
// duration unless -duration is given.
func TestParseFleetFlags(t *testing.T) {
	o, err := parseFlags([]string{"-scenario", "fleet", "-instances", "3", "-backends", "7", "-json", "f.json"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.fleet || o.fl.instances != 3 || o.fl.backends != 7 || o.fl.duration != fleetDefaultDuration || o.fl.jsonPath != "f.json" {
		t.Errorf("got %+v", o.fl)
	}
	o, err = parseFlags([]string{"-scenario", "fleet", "-duration", "10s", "-refresh", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.fl.duration != 10*time.Second || o.fl.refresh != 2*time.Second {
		t.Errorf("-duration 10s -refresh 2s: got %+v", o.fl)
	}
	if _, err := parseFlags([]string{"-scenario", "fleet,conn"}); err == nil {
		t.Error("-scenario fleet,conn: no error")
	}
}
