package main

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

func TestL4lbBusyConfigTurnsBusyPollOn(t *testing.T) {
	spec := l4lbBusySystem()
	if !spec.optIn {
		t.Error("l4lb-busy runs by default; it must be opt-in")
	}
	s := &system{spec: spec, routes: testRoutes()}
	cfg, err := config.Parse("l4lb.toml", []byte(l4lbConfigWith(s.routes, 1, "", spec.l4lbKeys)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.BusyPoll != 20*time.Microsecond {
		t.Errorf("busy_poll %v, want 20µs", cfg.Global.BusyPoll)
	}
	plain, err := config.Parse("l4lb.toml", []byte(l4lbConfig(s.routes, 1, "")))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Global.BusyPoll != 0 {
		t.Errorf("plain l4lb busy_poll %v, want off", plain.Global.BusyPoll)
	}
}
