package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// buildFlowsVersion builds l4lb into dir with another version of the
// hand-over's flow protocol stamped in: a new process that cannot adopt
// the running one's connections.
func buildFlowsVersion(t *testing.T, dir, version string) string {
	t.Helper()
	out := filepath.Join(dir, "l4lb-flows-"+version)
	flags := []string{"-ldflags=-X=github.com/l4lb/l4lb/pkg/handoff.flowsVersion=" + version}
	if raceEnabled {
		flags = append(flags, "-race")
	}
	if b, err := goBuild(out, flags...); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// Version skew: an upgrade to a build whose flow protocol differs leaves
// the open connections with the old process, which says so and relays
// them on. With upgrade_drain_timeout "0" (the default too) it keeps them
// until they close, well past shutdown_timeout (1 s here, for SIGTERM
// drains only), then exits; with "1s" it resets them after about that
// long and exits. Either way the new build serves new clients.
func TestHandoverVersionSkew(t *testing.T) {
	testnet.CheckLeaks(t)
	skew := buildFlowsVersion(t, t.TempDir(), "99")
	for _, tc := range []struct {
		name  string
		drain string // the [global] line, "" for the default
		cut   time.Duration
	}{
		{"drain 0: until they close", `upgrade_drain_timeout = "0"`, 0},
		{"drain by default: until they close", "", 0},
		{"drain 1s: then reset", `upgrade_drain_timeout = "1s"`, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testnet.StartBackend(t, "b", "")
			bin := filepath.Join(t.TempDir(), "l4lb")
			install(t, l4lbBin, bin)
			path, listen, _ := e2eutil.WriteConfig(t, "", []string{b.Addr}, "[global]\nshutdown_timeout = \"1s\"\n"+tc.drain)
			chain := startChain(t, bin, path)
			fleet := startSeqFleet(t, listen, "b", 5, 100*time.Millisecond)
			fleet.waitEchoedSince(t, time.Now(), "before the upgrade")

			install(t, skew, bin)
			asked := time.Now()
			old, served := chain.upgrade(t)
			if tag, err := testnet.Hello(listen, ""); err != nil || tag != "b" {
				t.Fatalf("a new client of the new build: %q, %v", tag, err)
			}
			defer func() {
				if t.Failed() {
					return
				}
				testnet.Eventually(t, "the old process to say the connections stay with it", func() bool {
					return strings.Contains(chain.logText(), logStaysHere)
				})
				if strings.Contains(chain.logText(), logAdopted) {
					t.Fatal("the new build of another flow version says it adopted connections")
				}
			}()

			if tc.cut > 0 {
				testnet.Eventually(t, "every connection to be reset by the old process", func() bool {
					return fleet.fails.count("reset") == len(fleet.conns)
				})
				for _, s := range fleet.conns {
					if at := time.Unix(0, s.failedAt.Load()); at.Sub(asked) < tc.cut {
						t.Fatalf("connection %d reset %v after the upgrade was asked for, before upgrade_drain_timeout (%v)", s.id, at.Sub(asked), tc.cut)
					}
				}
				t.Logf("reset %v after the upgrade was asked for, %v after l4lb upgrade saw the new process serve", time.Unix(0, fleet.conns[0].failedAt.Load()).Sub(asked).Round(time.Millisecond), time.Unix(0, fleet.conns[0].failedAt.Load()).Sub(served).Round(time.Millisecond))
				testnet.Eventually(t, "the old process to exit after its drain", func() bool { return processGone(old) })
				return
			}
			// Past shutdown_timeout and more: the old process still runs
			// and relays every connection.
			keep := time.Now().Add(3 * time.Second)
			for time.Now().Before(keep) {
				if s := fleet.fails.summary(); s != "" {
					t.Fatalf("%v after the upgrade was asked for, the connections left with the old process failed: %s", time.Since(asked).Round(time.Millisecond), s)
				}
				if processGone(old) {
					t.Fatalf("the old process exited %v after the upgrade was asked for, with its connections open", time.Since(asked).Round(time.Millisecond))
				}
				time.Sleep(100 * time.Millisecond)
			}
			fleet.waitEchoedSince(t, time.Now(), "by the old process, 3 s after the upgrade")
			fleet.finish(t)
			testnet.Eventually(t, "the old process to exit once its connections closed", func() bool { return processGone(old) })
		})
	}
}
