package config

import "testing"

// A duration past any sane setting is refused where it is written. Near
// the largest one Go parses ("2562047h"), the nanosecond clocks it is
// added to overflow: an idle_timeout re-arms its timer in the past and
// the event loop fires it forever; a max_cooldown jitters to a negative
// cooldown and the breaker probes without end.
func TestHugeDurationsRefused(t *testing.T) {
	const msg = "is too long: at most 876000h"
	tests := []problem{
		{"idle_timeout", withPool("idle_timeout = \"2562047h\" #!\n"), "pool.web.idle_timeout", msg},
		{"connect_budget", withPool("connect_budget = \"2000000h\" #!\n"), "pool.web.connect_budget", msg},
		{"max_cooldown", validBase + "[pool.web.breaker]\nmax_cooldown = \"2562047h\" #!\n", "pool.web.breaker.max_cooldown", msg},
		{"health timeout", validBase + "[pool.web.health]\ntimeout = \"876001h\" #!\n", "pool.web.health.timeout", msg},
		{"shutdown_timeout", "[global]\nshutdown_timeout = \"2562047h\" #!\n" + validBase, "global.shutdown_timeout", msg},
		{"session_timeout", "[[listener]]\nname = \"u\"\nbind = \"127.0.0.1:53\"\nprotocol = \"udp\"\npool = \"web\"\nsession_timeout = \"2562047h\" #!\n" + poolWeb,
			"listener[0].session_timeout", msg},
		// A key with a range of its own keeps its own message.
		{"queue_timeout", withPool("queue_timeout = \"2562047h\" #!\n"), "pool.web.queue_timeout", "out of range: must be between 0s and 1m0s"},
		{"health interval", validBase + "[pool.web.health]\ninterval = \"876001h\" #!\n", "pool.web.health.interval", "out of range: must be between 10ms and 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
	cfg := mustParse(t, withPool("idle_timeout = \"876000h\"\n"))
	if got := cfg.Pools["web"].IdleTimeout.String(); got != "876000h0m0s" {
		t.Fatalf("idle_timeout %s, want the bound itself accepted", got)
	}
}
