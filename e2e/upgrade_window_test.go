package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// The upgrade's window, with the real binary: from the moment the old
// process takes the state it hands over until the new one serves, the
// old one still serves. An operator's action then answers 409 (the new
// process would start without it: a disable undone is rule 5 broken),
// and a breaker that trips then reaches the new process open at the
// trip's generation (it would otherwise start closed at the old
// generation: readmission without post-trip evidence). The new process
// is held before it starts by a wrapper that waits for a file, so the
// window stays open as long as the test needs.
func TestUpgradeWindowRefusesActionsAndCarriesTrips(t *testing.T) {
	testnet.CheckLeaks(t)
	dir := t.TempDir()
	exe := l4lbBin
	bin, real := filepath.Join(dir, "l4lb"), filepath.Join(dir, "l4lb-real")
	install(t, exe, bin)
	install(t, exe, real)

	a := testnet.StartBackend(t, "a", "")
	d := testnet.StartBackend(t, "d", "")
	path, listen, adminAddr := e2eutil.WriteConfig(t, dir, nil, "")
	cfg, _ := os.ReadFile(path)
	cfg = fmt.Appendf(cfg, `retries = 1
[pool.p.health]
enabled = false
[pool.p.breaker]
failures = 2
window = "10m"
cooldown = "10m"
max_cooldown = "10m"
[[pool.p.backend]]
addr = %q
[[pool.p.backend]]
addr = %q
`, a.Addr, d.Addr)
	installBytes(t, cfg, path, 0o644)
	pidfile := filepath.Join(dir, "l4lb.pid")
	p := startLogged(t, bin, "-config", path, "-pidfile", pidfile, "-upgrade-timeout", "10m")
	waitPIDFile(t, p, pidfile)

	// The next executable waits for the gate, then runs l4lb.
	gate := filepath.Join(dir, "gate")
	next := upgradeToScript(t, p, bin, dir, fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done\nexec %s \"$@\"", gate, real))

	// In the window: a disable is refused, saying why.
	resp, err := http.Post("http://"+adminAddr+"/api/v1/pools/p/backends/"+a.Addr+"/disable", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("disable during the upgrade: %d, want 409", resp.StatusCode)
	}
	if !strings.Contains(p.logText(), "disable refused: a binary upgrade is under way") {
		t.Fatal("the refused disable is not logged")
	}
	// And d goes away: clients (retried on a) trip its breaker in the
	// old process.
	d.Close()
	testnet.Eventually(t, "d's breaker to trip in the old process", func() bool {
		if tag, err := testnet.Hello(listen, ""); err != nil || tag != "a" {
			t.Fatalf("a client during the window: %q %v", tag, err)
		}
		return backends(t, adminAddr, "p")[d.Addr].Breaker.State == "open"
	})
	tripped := backends(t, adminAddr, "p")[d.Addr].Breaker.Generation

	// The new process starts, serves, and the old one drains and exits.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the new process to serve", func() bool {
		pid, err := handoff.ReadPIDFile(pidfile)
		return err == nil && pid == next
	})
	testnet.Eventually(t, "the old process to exit", func() bool { return p.exited() })
	got := backends(t, adminAddr, "p")
	if b := got[d.Addr]; b.Breaker.State != "open" || b.Breaker.Generation != tripped || b.Breaker.CooldownLeft <= 0 {
		t.Fatalf("d in the new process: %+v, want open at generation %d with its cooldown running (tripped in the window)", b, tripped)
	}
	if got[a.Addr].Disabled {
		t.Fatal("the refused disable took effect in the new process")
	}
	for range 4 {
		if tag, err := testnet.Hello(listen, ""); err != nil || tag != "a" {
			t.Fatalf("a client of the new process: %q %v, want a (d's breaker open)", tag, err)
		}
	}
	log := p.logText()
	for _, want := range []string{"upgrade: breaker change followed from the old process", "upgrade: breaker feed from the old process ended"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	// Once it serves, the new process takes actions.
	resp, err = http.Post("http://"+adminAddr+"/api/v1/pools/p/backends/"+a.Addr+"/disable", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("disable on the new process: %d, want 200", resp.StatusCode)
	}
}
