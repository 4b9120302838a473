package main

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// Each variant is opt-in and sets its one key; plain l4lb keeps the
// defaults (busy_poll off, wake_coalesce 20µs).
func TestL4lbWakeupVariants(t *testing.T) {
	routes := testRoutes()
	plain, err := config.Parse("l4lb.toml", []byte(l4lbConfig(routes, 1, "")))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Global.BusyPoll != 0 || plain.Global.WakeCoalesce != 20*time.Microsecond {
		t.Errorf("plain l4lb busy_poll %v, wake_coalesce %v; want off and the default 20µs", plain.Global.BusyPoll, plain.Global.WakeCoalesce)
	}
	for _, tc := range []struct {
		spec systemSpec
		want func(config.Global) bool
		says string
	}{
		{l4lbBusySystem(), func(g config.Global) bool { return g.BusyPoll == 20*time.Microsecond }, "busy_poll 20µs"},
		{l4lbEagerSystem(), func(g config.Global) bool { return g.WakeCoalesce == 0 }, "wake_coalesce off"},
	} {
		if !tc.spec.optIn {
			t.Errorf("%s runs by default; it must be opt-in", tc.spec.name)
		}
		cfg, err := config.Parse("l4lb.toml", []byte(l4lbConfigWith(routes, 1, "", tc.spec.l4lbKeys)))
		if err != nil {
			t.Fatalf("%s: %v", tc.spec.name, err)
		}
		if !tc.want(cfg.Global) {
			t.Errorf("%s: [global] %+v, want %s", tc.spec.name, cfg.Global, tc.says)
		}
	}
}
