package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// backupConfig writes l4lb's file for pool p over primaries and backups
// (backup = true) and returns its path, the listener and admin addresses.
func backupConfig(t *testing.T, primaries, backups []string) (path, listen, adminAddr string) {
	t.Helper()
	listen, adminAddr = testnet.FreeAddr(t), testnet.FreeAddr(t)
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", adminAddr, listen)
	// retries = 2: a client whose two primaries have just died reaches the
	// backup before the checks notice.
	b.WriteString("[pool.p]\nalgorithm = \"round-robin\"\nretries = 2\n" +
		"[pool.p.health]\ninterval = \"100ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n" +
		// The client dials trip the dead primaries before their checks
		// fail twice; a short cooldown probes them back soon after they
		// return.
		"[pool.p.breaker]\ncooldown = \"100ms\"\nmax_cooldown = \"400ms\"\n")
	for _, a := range primaries {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	for _, a := range backups {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\nbackup = true\n", a)
	}
	path = filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listen, adminAddr
}

// steadyClients connects clients to listen one after another until stop,
// at most 20,000 of them, counting the failures and the last backend
// reached.
type steadyClients struct {
	failed atomic.Int64
	served atomic.Int64
	mu     sync.Mutex
	errs   []error
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func startSteadyClients(t *testing.T, listen string) *steadyClients {
	s := &steadyClients{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(s.end)
	go func() {
		defer close(s.done)
		for range 20_000 {
			select {
			case <-s.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if _, err := testnet.Hello(listen, ""); err != nil {
				s.failed.Add(1)
				s.mu.Lock()
				s.errs = append(s.errs, err)
				s.mu.Unlock()
				continue
			}
			s.served.Add(1)
		}
	}()
	return s
}

func (s *steadyClients) end() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// The real binary under a steady client load: the primaries killed, the
// backup serves, the primaries back, they serve again; then disabled and
// enabled through the admin API. No client fails; the metric and the log
// say which set serves, the pools JSON which role each backend has.
func TestBackupServesWhilePrimariesAreOut(t *testing.T) {
	testnet.CheckLeaks(t)
	p0, p1 := testnet.StartBackend(t, "primary0", ""), testnet.StartBackend(t, "primary1", "")
	backup := testnet.StartBackend(t, "backup", "")
	path, listen, adminAddr := backupConfig(t, []string{p0.Addr, p1.Addr}, []string{backup.Addr})
	l := startL4LB(t, "", nil, "-config", path)
	waitServing(t, l, listen)

	const gauge = `l4lb_pool_serving_backups{pool="p"}`
	if bs := backends(t, adminAddr, "p"); bs[p0.Addr].Role != "primary" || bs[backup.Addr].Role != "backup" || e2eutil.Metric(t, adminAddr, gauge) != 0 {
		t.Fatalf("at start: roles %+v, serving backups %v; want the backup's role backup, the primaries serving", bs, e2eutil.Metric(t, adminAddr, gauge))
	}
	reaches := func(prefix string) func() bool {
		return func() bool {
			tag, err := testnet.Hello(listen, "")
			return err == nil && strings.HasPrefix(tag, prefix)
		}
	}
	load := startSteadyClients(t, listen)

	p0.Close()
	p1.Close()
	testnet.Eventually(t, "the backup to serve", func() bool { return e2eutil.Metric(t, adminAddr, gauge) == 1 })
	for range 10 {
		if !reaches("backup")() {
			t.Fatal("a client did not reach the backup while the primaries were down")
		}
	}

	p0 = testnet.StartBackend(t, "primary0", p0.Addr)
	p1 = testnet.StartBackend(t, "primary1", p1.Addr)
	testnet.Eventually(t, "the primaries to serve again", func() bool { return e2eutil.Metric(t, adminAddr, gauge) == 0 })
	testnet.Eventually(t, "a client to reach a primary", reaches("primary"))

	for _, a := range []string{p0.Addr, p1.Addr} {
		if code := post(t, "http://"+adminAddr+"/api/v1/pools/p/backends/"+a+"/disable", ""); code != 200 {
			t.Fatalf("disable %s: %d", a, code)
		}
	}
	testnet.Eventually(t, "the backup to serve with the primaries disabled", reaches("backup"))
	if code := post(t, "http://"+adminAddr+"/api/v1/pools/p/backends/"+p0.Addr+"/enable", ""); code != 200 {
		t.Fatalf("enable: %d", code)
	}
	testnet.Eventually(t, "a client to reach the enabled primary", reaches("primary0"))

	load.end()
	if n := load.failed.Load(); n != 0 {
		t.Errorf("%d of %d clients failed under the steady load: %v", n, n+load.served.Load(), load.errs)
	}
	if load.served.Load() == 0 {
		t.Error("the steady load served no client")
	}
	logs := l.stderr.String()
	for _, want := range []string{"no primary backend is usable: new clients go to the backups", "a primary backend is usable again"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	l.signal(t, syscall.SIGTERM)
	if code := l.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// l4lb check refuses a pool of backups alone, and says why.
func TestCheckRefusesAPoolOfBackupsOnly(t *testing.T) {
	path, _, _ := backupConfig(t, nil, []string{"127.0.0.1:9"})
	var out, errb bytes.Buffer
	if code := runL4LB(t, []string{"check", "-config", path}, &out, &errb); code == 0 || !strings.Contains(out.String()+errb.String(), "every backend of the pool is a backup") {
		t.Fatalf("check of a pool of backups only: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
