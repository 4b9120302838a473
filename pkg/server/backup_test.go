package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// Backup backends on the real data path: echo backends on 127.0.0.1 that
// say who they are, clients through the event loops, and the primaries
// taken out the three ways a pool knows: killed (the port refuses, the
// health checks fail), tripped (the breaker opens on failed client
// dials) and disabled by an operator.

// healthChecked is a pool whose checks alone take a backend out (its
// breaker never trips), with retries enough to reach a backup past both
// primaries.
const healthChecked = "retries = 2\n[pool.p.health]\ninterval = \"100ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n[pool.p.breaker]\nfailures = 1000\n"

// backupLB is l4lb over two primaries and two backups.
type backupLB struct {
	*lb
	pool      *pool.Pool
	primaries []*testnet.Backend
	backups   []*testnet.Backend
}

// startBackupLB starts the backends and l4lb in front of them; extra goes
// inside [pool.p].
func startBackupLB(t *testing.T, extra string) *backupLB {
	t.Helper()
	noLeaks(t)
	f := &backupLB{}
	var addrs []string
	for i := range 2 {
		b := testnet.StartBackend(t, fmt.Sprintf("primary%d", i), "")
		f.primaries = append(f.primaries, b)
		addrs = append(addrs, b.Addr)
	}
	text := poolTOML(t, "round-robin", addrs, extra)
	for i := range 2 {
		b := testnet.StartBackend(t, fmt.Sprintf("backup%d", i), "")
		f.backups = append(f.backups, b)
		text += fmt.Sprintf("[[pool.p.backend]]\naddr = %q\nbackup = true\n", b.Addr)
	}
	f.lb = startLB(t, text, 0)
	f.pool = f.pools["p"]
	return f
}

// clients connects n clients one after another and checks that each
// reached a backend whose tag starts with want.
func (f *backupLB) clients(t *testing.T, n int, want string) {
	t.Helper()
	for range n {
		tag, err := testnet.Hello(f.addr, "")
		if err != nil {
			t.Fatalf("a client wanting a %s failed: %v", want, err)
		}
		if !strings.HasPrefix(tag, want) {
			t.Fatalf("a client reached %s, want a %s", tag, want)
		}
	}
}

// waitServing waits for the pool to serve from want, sending a client now
// and then when nudge is set (a breaker trips only on dials).
func (f *backupLB) waitServing(t *testing.T, want pool.Serving, nudge bool) {
	t.Helper()
	testnet.Eventually(t, "the pool to serve from "+want.String(), func() bool {
		if nudge {
			if _, err := testnet.Hello(f.addr, ""); err != nil {
				t.Errorf("a client failed while the pool turned to %s: %v", want, err)
			}
		}
		return f.pool.Serving() == want
	})
}

// hold opens a client connection, reads its backend's tag and keeps it.
func (f *backupLB) hold(t *testing.T) (*net.TCPConn, *bufio.Reader, string) {
	t.Helper()
	c := dial(t, f.addr)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	tag, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return c, r, strings.TrimSuffix(tag, "\n")
}

func echoes(t *testing.T, c *net.TCPConn, r *bufio.Reader, what string) {
	t.Helper()
	if _, err := c.Write([]byte("still there\n")); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "still there\n" {
		t.Fatalf("%s: echo %q, %v", what, line, err)
	}
}

// Whichever way the primaries go, the clients go to the backups with none
// failing, and come back to the primaries once they return; a connection
// a backup took keeps working after the primaries are back.
func TestBackupsTakeClientsWhilePrimariesAreOut(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		extra string
		nudge bool // the pool learns by client dials (a breaker)
		out   func(t *testing.T, f *backupLB)
		back  func(t *testing.T, f *backupLB)
	}{
		{
			name:  "killed",
			extra: healthChecked,
			out:   killPrimaries,
			back:  restartPrimaries,
		},
		{
			name:  "tripped",
			extra: "retries = 2\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"100ms\"\nmax_cooldown = \"200ms\"\nsuccesses = 1\n",
			nudge: true,
			out:   killPrimaries,
			back:  restartPrimaries,
		},
		{
			name:  "disabled",
			extra: "[pool.p.health]\nenabled = false\n",
			out: func(t *testing.T, f *backupLB) {
				for _, b := range f.pool.Backends()[:2] {
					if err := f.pool.Disable(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
			},
			back: func(t *testing.T, f *backupLB) {
				if err := f.pool.Enable(ctx, f.pool.Backends()[1]); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startBackupLB(t, tc.extra)
			f.clients(t, 10, "primary")

			tc.out(t, f)
			f.waitServing(t, pool.ServingBackup, tc.nudge)
			f.clients(t, 10, "backup")
			c, r, tag := f.hold(t)
			if !strings.HasPrefix(tag, "backup") {
				t.Fatalf("a client held while the backups serve reached %s", tag)
			}

			tc.back(t, f)
			f.waitServing(t, pool.ServingPrimary, false)
			f.clients(t, 10, "primary")
			echoes(t, c, r, "the backup's connection after the primaries came back")
			if failed := f.listener("front").Failed; failed != 0 {
				t.Errorf("%d clients failed, want none", failed)
			}
		})
	}
}

// killPrimaries closes the primaries: their ports refuse.
func killPrimaries(_ *testing.T, f *backupLB) {
	for _, b := range f.primaries {
		b.Close()
	}
}

// restartPrimaries starts the primaries again on their addresses.
func restartPrimaries(t *testing.T, f *backupLB) {
	for i, b := range f.primaries {
		f.primaries[i] = testnet.StartBackend(t, b.Tag, b.Addr)
	}
}

// With the backups gone too, the pool is all down as a pool without
// backups is: one force-try per client, of a primary, and the client
// fails when it fails.
func TestBackupsGoneTooIsAllDown(t *testing.T) {
	f := startBackupLB(t, healthChecked)
	killPrimaries(t, f)
	f.waitServing(t, pool.ServingBackup, false)
	f.clients(t, 4, "backup")
	for _, b := range f.backups {
		b.Close()
	}
	f.waitServing(t, pool.ServingNone, false)
	if tag, err := testnet.Hello(f.addr, ""); err == nil {
		t.Fatalf("all down: a client reached %s", tag)
	}
	testnet.Eventually(t, "the client counted as failed", func() bool { return f.listener("front").Failed == 1 })
	var primaryForce, backupForce int64
	for _, b := range f.pool.Backends() {
		_, failed := b.Dials(pool.DialForce)
		if b.Backup() {
			backupForce += failed
		} else {
			primaryForce += failed
		}
	}
	if primaryForce != 1 || backupForce != 0 {
		t.Errorf("force-tries: %d of primaries, %d of backups; want the one of a primary", primaryForce, backupForce)
	}
}

// A UDP pool's sessions follow the same rule: new sessions go to the
// backups while the primaries are disabled, to the primaries once one is
// enabled; a session a backup holds keeps relaying to it.
func TestUDPBackupsTakeSessionsWhilePrimariesAreOut(t *testing.T) {
	var addrs []string
	for _, tag := range []string{"primary0", "primary1", "backup0", "backup1"} {
		addrs = append(addrs, testnet.StartUDPBackend(t, tag, "").Addr)
	}
	l := startUDPLB(t, addrs, udpOpts{pool: func(pc *config.Pool) {
		pc.Backends[2].Backup = true
		pc.Backends[3].Backup = true
	}})
	sessions := func(want string) {
		t.Helper()
		for range 6 {
			if got := who(t, udpClient(t, l.addr)); !strings.HasPrefix(got, want) {
				t.Fatalf("a new session reached %s, want a %s", got, want)
			}
		}
	}
	sessions("primary")
	ctx := context.Background()
	for _, b := range l.pool.Backends()[:2] {
		if err := l.pool.Disable(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if s := l.pool.Serving(); s != pool.ServingBackup {
		t.Fatalf("primaries disabled: serving %v, want backup", s)
	}
	sessions("backup")
	held := udpClient(t, l.addr)
	tag := who(t, held)
	if err := l.pool.Enable(ctx, l.pool.Backends()[0]); err != nil {
		t.Fatal(err)
	}
	sessions("primary")
	if got := who(t, held); got != tag {
		t.Errorf("the session on %s moved to %s once a primary came back; want it kept", tag, got)
	}
}
