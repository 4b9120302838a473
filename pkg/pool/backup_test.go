package pool_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pick"
	"github.com/l4lb/l4lb/pkg/pool"
)

// Backup backends without sockets: which set Plan takes candidates from as
// the primaries leave and come back, under every algorithm. The backends'
// addresses are never dialed; the tests trip, disable, drain and weigh
// them through the pool's own calls.

// backupTOML is poolTOML with backups after the primaries.
func backupTOML(t testing.TB, primaries, backups []string, extra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(poolTOML(t, primaries, extra))
	for _, a := range backups {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\nbackup = true\n", a)
	}
	return b.String()
}

// backupPool is pool "p" over two primaries (indices 0, 1) and two backups
// (2, 3) with algorithm, health checks off and a breaker that trips on
// one failure, on a fake clock, not run (its breakers change only by the
// test's calls). logs gets its log lines.
func backupPool(t *testing.T, algorithm, extra string, logs *logRecorder) *pool.Pool {
	t.Helper()
	testnet.CheckLeaks(t)
	clk := clock.NewFake(time.Now())
	text := backupTOML(t, []string{"127.0.0.1:1001", "127.0.0.1:1002"}, []string{"127.0.0.1:1003", "127.0.0.1:1004"},
		fmt.Sprintf("algorithm = %q\nretries = 1\n%s\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\ncooldown = \"60s\"", algorithm, extra))
	deps := pool.Deps{Store: breaker.NewMemoryStore(clk), Clock: clk}
	if logs != nil {
		deps.Logger = slog.New(logs)
	}
	p, err := pool.New(parse(t, text).Pools["p"], deps)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// everyAlgorithm runs f on a backupPool of each algorithm, with the
// backends.
func everyAlgorithm(t *testing.T, f func(t *testing.T, p *pool.Pool, bs []*pool.Backend)) {
	for _, algo := range pick.Algorithms {
		t.Run(algo, func(t *testing.T) {
			p := backupPool(t, algo, "", nil)
			f(t, p, p.Backends())
		})
	}
}

// clients are sources enough to reach every backend under every
// algorithm.
var clients = func() []netip.AddrPort {
	var out []netip.AddrPort
	for i := range 64 {
		out = append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 8), byte(i)}), uint16(40000+i)))
	}
	return out
}()

// planned returns the backends Plan names first (the one each client
// goes to) for the clients. It fails on a force-try, an empty plan, or a
// plan with a primary (0, 1) after a backup (2, 3): the retries the
// primaries cannot fill go to the backups, after them.
func planned(t *testing.T, p *pool.Pool, what string) map[int]bool {
	t.Helper()
	seen := map[int]bool{}
	var buf [pool.MaxCandidates]int
	for range 2 { // round robin and random move on between passes
		for _, c := range clients {
			cands, force := p.Plan(c, buf[:0])
			if force || len(cands) == 0 {
				t.Fatalf("%s: plan %v force %v for %v, want candidates", what, cands, force, c)
			}
			if k := slices.IndexFunc(cands, func(i int) bool { return i >= 2 }); k >= 0 && slices.ContainsFunc(cands[k:], func(i int) bool { return i < 2 }) {
				t.Fatalf("%s: plan %v for %v has a primary after a backup", what, cands, c)
			}
			seen[cands[0]] = true
		}
	}
	return seen
}

func wantOnly(t *testing.T, what string, seen map[int]bool, want ...int) {
	t.Helper()
	got := slices.Sorted(func(yield func(int) bool) {
		for i := range seen {
			if !yield(i) {
				return
			}
		}
	})
	if !slices.Equal(got, want) {
		t.Errorf("%s: planned backends %v, want %v", what, got, want)
	}
}

func wantServing(t *testing.T, p *pool.Pool, what string, want pool.Serving) {
	t.Helper()
	if got := p.Serving(); got != want {
		t.Errorf("%s: serving %v, want %v", what, got, want)
	}
}

// Every algorithm picks from the set serving only: the primaries while one
// is in rotation, the backups while none is (tripped, disabled, drained or
// weighed 0), the primaries again once one is back, whatever load the
// backups still hold.
func TestEveryAlgorithmPicksOnlyFromTheSetServing(t *testing.T) {
	ctx := context.Background()
	everyAlgorithm(t, func(t *testing.T, p *pool.Pool, bs []*pool.Backend) {
		wantServing(t, p, "all up", pool.ServingPrimary)
		wantOnly(t, "all up", planned(t, p, "all up"), 0, 1)
		var buf [pool.MaxCandidates]int
		for _, c := range clients {
			if cands, _ := p.Plan(c, buf[:0]); slices.ContainsFunc(cands, func(i int) bool { return i >= 2 }) {
				t.Fatalf("all up: plan %v names a backup, though the two primaries fill 1+retries", cands)
			}
		}

		fail(p, bs[0]) // tripped
		wantOnly(t, "primary 0 tripped", planned(t, p, "primary 0 tripped"), 1)
		if err := p.Disable(ctx, bs[1]); err != nil {
			t.Fatal(err)
		}
		wantServing(t, p, "primaries tripped and disabled", pool.ServingBackup)
		wantOnly(t, "primaries tripped and disabled", planned(t, p, "primaries out"), 2, 3)

		// Load on the backups, as connections they took while serving.
		for range 5 {
			d := p.BeginDial(bs[2], false)
			p.EndDial(d, dialer.Success)
		}
		if err := p.Enable(ctx, bs[1]); err != nil {
			t.Fatal(err)
		}
		wantServing(t, p, "primary 1 enabled", pool.ServingPrimary)
		wantOnly(t, "primary 1 enabled", planned(t, p, "primary 1 enabled"), 1)
		if bs[2].Active() != 5 {
			t.Errorf("the backup's connections: %d, want its 5 left open", bs[2].Active())
		}
		for range 5 {
			p.EndRelay(bs[2])
		}

		// A drain and a weight of 0 take a primary out as surely.
		if err := p.Drain(ctx, bs[1], time.Hour); err != nil {
			t.Fatal(err)
		}
		wantServing(t, p, "primary 1 drained", pool.ServingBackup)
		wantOnly(t, "primary 1 drained", planned(t, p, "primary 1 drained"), 2, 3)
		p.Enable(ctx, bs[1])
		wantServing(t, p, "drain ended", pool.ServingPrimary)
		if err := p.SetWeight(ctx, bs[1], 0); err != nil {
			t.Fatal(err)
		}
		wantServing(t, p, "primary 1 at weight 0", pool.ServingBackup)
		wantOnly(t, "primary 1 at weight 0", planned(t, p, "primary 1 at weight 0"), 2, 3)
		if err := p.SetWeight(ctx, bs[1], 1); err != nil {
			t.Fatal(err)
		}
		wantOnly(t, "primary 1 weighed again", planned(t, p, "primary 1 weighed again"), 1)
	})
}

// Adding backups to a pool moves no client of the hashing algorithms
// between its primaries: each set hashes over its own members.
func TestBackupsMoveNoPrimaryKey(t *testing.T) {
	primaries := []string{"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"}
	for _, algo := range []string{pick.IPHash, pick.ConsistentHash, pick.Maglev} {
		t.Run(algo, func(t *testing.T) {
			extra := fmt.Sprintf("algorithm = %q\n[pool.p.health]\nenabled = false", algo)
			store := breaker.NewMemoryStore(nil)
			alone, err := pool.New(parse(t, poolTOML(t, primaries, extra)).Pools["p"], pool.Deps{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			with, err := pool.New(parse(t, backupTOML(t, primaries, []string{"127.0.0.1:1004", "127.0.0.1:1005"}, extra)).Pools["p"],
				pool.Deps{Store: breaker.NewMemoryStore(nil)})
			if err != nil {
				t.Fatal(err)
			}
			var a, b [pool.MaxCandidates]int
			for _, c := range clients {
				x, _ := alone.Plan(c, a[:0])
				y, _ := with.Plan(c, b[:0])
				if alone.At(x[0]).Addr != with.At(y[0]).Addr {
					t.Errorf("client %v: %s alone, %s beside backups", c, alone.At(x[0]).Addr, with.At(y[0]).Addr)
				}
			}
		})
	}
}

// A primary at its max_connections is still in rotation: the pool is
// Full (the client queues), and no client overflows to the backups.
func TestFullPrimariesDoNotOverflowToBackups(t *testing.T) {
	text := backupTOML(t, []string{"127.0.0.1:1001"}, []string{"127.0.0.1:1002"}, "[pool.p.health]\nenabled = false")
	text = strings.Replace(text, "addr = \"127.0.0.1:1001\"\n", "addr = \"127.0.0.1:1001\"\nmax_connections = 1\n", 1)
	p, err := pool.New(parse(t, text).Pools["p"], pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	primary := p.Backends()[0]
	d, ok := p.TryBeginDial(primary, false)
	if !ok {
		t.Fatal("setup: no slot on the primary")
	}
	p.EndDial(d, dialer.Success)
	var buf [pool.MaxCandidates]int
	cands, force := p.Plan(client, buf[:0])
	if len(cands) != 0 || force || !p.Full() {
		t.Fatalf("primary full: plan %v force %v full %v, want nothing, no force-try, Full (the client queues)", cands, force, p.Full())
	}
	wantServing(t, p, "primary full", pool.ServingPrimary)
	p.EndRelay(primary)
	if cands, _ = p.Plan(client, buf[:0]); !slices.Equal(cands, []int{0, 1}) {
		t.Errorf("slot freed: plan %v, want the primary, then the backup for the retry", cands)
	}
}

// All down, the force-try is a primary's while any primary may be tried
// (not disabled, not draining), whatever cooldowns the backups have left;
// a backup's once every primary is out by an operator's hand; nothing once
// every backend is.
func TestAllDownForceTriesPrimariesFirst(t *testing.T) {
	ctx := context.Background()
	everyAlgorithm(t, func(t *testing.T, p *pool.Pool, bs []*pool.Backend) {
		fail(p, bs[0])
		fail(p, bs[1])
		// The backups trip later: less cooldown left than the
		// primaries', which the force-try does not look at.
		p.Disable(ctx, bs[2])
		fail(p, bs[3])
		wantServing(t, p, "all out", pool.ServingNone)
		var buf [pool.MaxCandidates]int
		for _, c := range clients {
			cands, force := p.Plan(c, buf[:0])
			if !force || len(cands) != 1 || cands[0] > 1 {
				t.Fatalf("all down: plan %v force %v, want a force-try of a primary", cands, force)
			}
		}
		p.Disable(ctx, bs[0])
		if err := p.Drain(ctx, bs[1], time.Hour); err != nil {
			t.Fatal(err)
		}
		if cands, force := p.Plan(client, buf[:0]); !force || !slices.Equal(cands, []int{3}) {
			t.Fatalf("primaries disabled and drained: plan %v force %v, want a force-try of backup 3", cands, force)
		}
		p.Disable(ctx, bs[3])
		if cands, _ := p.Plan(client, buf[:0]); len(cands) != 0 {
			t.Fatalf("every backend disabled or draining: plan %v, want nothing", cands)
		}
	})
}

// The pool says when it starts and stops serving from its backups.
func TestServingFromBackupsIsLogged(t *testing.T) {
	logs := &logRecorder{}
	p := backupPool(t, pick.LeastConn, "", logs)
	ctx := context.Background()
	bs := p.Backends()
	fail(p, bs[0])
	p.Disable(ctx, bs[1])
	const to, back, none = "no primary backend is usable: new clients go to the backups",
		"a primary backend is usable again: new clients go to the primaries, the backups' connections finish",
		"no backup backend is usable either: the pool is all down"
	if n := len(logs.messages(to)); n != 1 {
		t.Errorf("%q logged %d times, want once", to, n)
	}
	p.Disable(ctx, bs[2])
	p.Disable(ctx, bs[3])
	if n := len(logs.messages(none)); n != 1 {
		t.Errorf("%q logged %d times, want once", none, n)
	}
	p.Enable(ctx, bs[2])
	p.Enable(ctx, bs[1])
	if got := logs.messages(back); len(got) != 1 || got[0]["primaries_usable"] != "1" {
		t.Errorf("%q logged %v, want once with primaries_usable 1", back, got)
	}
	if n := len(logs.messages(to)); n != 2 {
		t.Errorf("%q logged %d times in all, want twice (out of none into backups, then back)", to, n)
	}
}

// A backend that changes role at a reload keeps what it had by identity:
// its breaker, its drain, its connections; and it serves in its new set.
func TestReloadChangingARoleKeepsTheBackendsState(t *testing.T) {
	const extra = "[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 1\n"
	build := reloads(t, breaker.NewMemoryStore(nil))
	old := build(backupTOML(t, []string{"127.0.0.1:1001", "127.0.0.1:1002"}, []string{"127.0.0.1:1003"}, extra), nil)
	a, tripped, backup := old.Backends()[0], old.Backends()[1], old.Backends()[2]
	d := old.BeginDial(a, false)
	old.EndDial(d, dialer.Success) // one connection open on a
	fail(old, tripped)
	d = old.BeginDial(backup, false)
	old.EndDial(d, dialer.Success)

	// 1001 becomes a backup, 1003 a primary.
	next := build(backupTOML(t, []string{"127.0.0.1:1002", "127.0.0.1:1003"}, []string{"127.0.0.1:1001"}, extra), old)
	old.HandOver(next)
	nb := map[string]*pool.Backend{}
	for _, b := range next.Backends() {
		nb[b.Addr] = b
	}
	if b := nb["127.0.0.1:1001"]; !b.Backup() || b.Active() != 1 {
		t.Errorf("1001 after becoming a backup: backup %v, active %d; want true, its connection carried", b.Backup(), b.Active())
	}
	if b := nb["127.0.0.1:1003"]; b.Backup() || b.Active() != 1 {
		t.Errorf("1003 after becoming a primary: backup %v, active %d; want false, its connection carried", b.Backup(), b.Active())
	}
	if st := nb["127.0.0.1:1002"].Breaker(); !st.Open {
		t.Error("the tripped primary's breaker closed at the reload")
	}
	var buf [pool.MaxCandidates]int
	for range 4 {
		if cands, force := next.Plan(client, buf[:0]); force || len(cands) != 2 || next.At(cands[0]).Addr != "127.0.0.1:1003" || next.At(cands[1]).Addr != "127.0.0.1:1001" {
			t.Fatalf("after the reload: plan %v force %v, want the new primary 1003, then the new backup 1001 for the retry", cands, force)
		}
	}
	wantServing(t, next, "after the reload", pool.ServingPrimary)
	old.EndRelay(a)
	old.EndRelay(backup)
}
