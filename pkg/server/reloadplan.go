package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/l4lb/l4lb/pkg/config"
)

// What a reload of the configuration in place reports, and what it
// leaves as it runs: the keys a reload does not apply.

// ReloadResult is what a successful reload reports (the API's JSON).
type ReloadResult struct {
	Result   string   `json:"result"`
	Hash     string   `json:"hash"`
	Kept     int      `json:"listeners_kept"`
	Added    int      `json:"listeners_added"`
	Removed  int      `json:"listeners_removed"`
	Pools    int      `json:"pools"`
	Warnings []string `json:"warnings"` // [] when none, as the contract shows it
	// Changes names what changed: the counts above say how much.
	Changes ConfigChanges `json:"changes"`
}

// StillRunning is what runs after a reload from running to cfg: the same
// start-time keys, and cfg's listeners, a kept TCP one with the backlog
// its sockets were bound with.
func StillRunning(running, cfg *config.Config) *config.Config {
	next := *running
	bound := map[string]int{}
	for _, l := range running.Listeners {
		if l.Protocol != config.ProtocolUDP {
			bound[l.Bind] = l.Backlog
		}
	}
	next.Listeners = slices.Clone(cfg.Listeners)
	for i, l := range next.Listeners {
		if b, ok := bound[l.Bind]; ok && l.Protocol != config.ProtocolUDP {
			next.Listeners[i].Backlog = b
		}
	}
	return &next
}

// NeedsRestart lists the changes a reload does not apply: they take an
// upgrade (l4lb upgrade) or a restart.
func NeedsRestart(old, cfg *config.Config) []string {
	var w []string
	note := func(key string, changed bool) {
		if changed {
			w = append(w, fmt.Sprintf("%s changed: it applies at the next upgrade or restart; the running value stays", key))
		}
	}
	note("[global] event_loops", old.Global.EventLoops != cfg.Global.EventLoops)
	note("[global] pipe_size", old.Global.PipeSize != cfg.Global.PipeSize)
	note("[global] busy_poll", old.Global.BusyPoll != cfg.Global.BusyPoll)
	note("[global] wake_coalesce", old.Global.WakeCoalesce != cfg.Global.WakeCoalesce)
	note("[admin]", old.Admin != cfg.Admin)
	note("[log]", old.Log != cfg.Log)
	note("[cluster]", !reflect.DeepEqual(old.Cluster, cfg.Cluster))
	note("[global] state_file", old.Global.StateFile != cfg.Global.StateFile)
	oldBacklog := map[string]int{}
	for _, l := range old.Listeners {
		oldBacklog[l.Bind] = l.Backlog
	}
	for _, l := range cfg.Listeners {
		if b, ok := oldBacklog[l.Bind]; ok && b != l.Backlog && l.Protocol != config.ProtocolUDP {
			note(fmt.Sprintf("listener %q backlog", l.Name), true)
		}
	}
	return w
}

// FileHash is the configuration file's hash, as the admin endpoint shows
// it and a reload reports it.
func FileHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ErrorLines splits a configuration error into its problems, one per
// line as `l4lb check` prints them.
func ErrorLines(err error) []string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
