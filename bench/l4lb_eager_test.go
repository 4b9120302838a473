package main

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

func TestL4lbEagerConfigTurnsCoalescingOff(t *testing.T) {
	spec := l4lbEagerSystem()
	if !spec.optIn {
		t.Error("l4lb-eager runs by default; it must be opt-in")
	}
	s := &system{spec: spec, routes: testRoutes()}
	cfg, err := config.Parse("l4lb.toml", []byte(l4lbConfigWith(s.routes, 1, "", spec.l4lbKeys)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Global.WakeCoalesce != 0 {
		t.Errorf("wake_coalesce %v, want off", cfg.Global.WakeCoalesce)
	}
	plain, err := config.Parse("l4lb.toml", []byte(l4lbConfig(s.routes, 1, "")))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Global.WakeCoalesce != 20*time.Microsecond {
		t.Errorf("plain l4lb wake_coalesce %v, want the default 20µs", plain.Global.WakeCoalesce)
	}
}
