package server

import (
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// A reload cannot change the keys the process is built around; it keeps
// the running values and says which keys wait for a restart.
func TestReloadNamesTheKeysThatNeedARestart(t *testing.T) {
	base := func() *config.Config {
		return &config.Config{Global: config.DefaultGlobal(), Admin: config.DefaultAdmin(), Log: config.DefaultLog()}
	}
	cases := []struct {
		key    string
		change func(c *config.Config)
	}{
		{"[global] event_loops", func(c *config.Config) { c.Global.EventLoops = 3 }},
		{"[global] pipe_size", func(c *config.Config) { c.Global.PipeSize = 65536 }},
		{"[global] busy_poll", func(c *config.Config) { c.Global.BusyPoll = 20 * time.Microsecond }},
		{"[global] wake_coalesce", func(c *config.Config) { c.Global.WakeCoalesce = 0 }},
		{"[global] state_file", func(c *config.Config) { c.Global.StateFile = "/var/lib/l4lb/state.json" }},
	}
	if got := NeedsRestart(base(), base()); len(got) != 0 {
		t.Fatalf("an unchanged config needs a restart: %q", got)
	}
	for _, tc := range cases {
		next := base()
		tc.change(next)
		got := NeedsRestart(base(), next)
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.key+" changed") {
			t.Errorf("%s changed: got %q, want one line naming it", tc.key, got)
		}
	}
}
