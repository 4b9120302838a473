package splice

import (
	"os"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The pool caps the pipes in existence, keeps at most MaxIdle of them
// idle, and closes the rest.
func TestPipePoolCapsAndKeepsIdle(t *testing.T) {
	testnet.CheckLeaks(t)
	before := countPipeFDs(t)
	pool := NewPipePool(PipePoolConfig{Size: 64 << 10, MaxOpen: 3, MaxIdle: 1})
	var ps []*pipe
	for range 3 {
		p := pool.get()
		if p == nil {
			t.Fatal("no pipe under the cap")
		}
		ps = append(ps, p)
	}
	if p := pool.get(); p != nil {
		t.Fatal("a pipe past the cap")
	}
	if got := countPipeFDs(t) - before; got != 6 {
		t.Fatalf("%d pipe fds for 3 pipes", got)
	}
	pool.put(ps[0]) // kept idle
	pool.put(ps[1]) // past MaxIdle: closed
	if s := pool.Stats(); s.Open != 2 || s.Idle != 1 || s.Busy() != 1 {
		t.Fatalf("stats %+v, want 2 open, 1 idle", s)
	}
	if p := pool.get(); p != ps[0] {
		t.Fatal("the idle pipe was not handed out again")
	}
	pool.discard(ps[0]) // held bytes: closed, never reused
	pool.put(ps[2])
	pool.Trim()
	if s := pool.Stats(); s.Open != 0 {
		t.Fatalf("stats %+v after Trim, want nothing open", s)
	}
	if got := countPipeFDs(t); got != before {
		t.Fatalf("%d pipe fds left, %d before", got, before)
	}
}

// l4lb runs as an unprivileged user under systemd, where the kernel's
// per-user pipe quota (fs.pipe-user-pages-soft) applies: this test runs
// the pool as such a user, directly when the test is not root, and when
// it is, by re-running this test binary as an unprivileged uid of its
// own. The quota is per user: a uid no other test uses keeps what this
// test spends apart from tests running at the same time (pkg/loop's child,
// cmd's tests that run l4lb as nobody).

const childUID = 65532

const childEnv = "L4LB_SPLICE_UNPRIVILEGED_CHILD"

func TestPipePoolAsUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		spentQuotaScenario(t)
		return
	}
	testnet.RunChildAs(t, childUID, childEnv, "TestUnprivilegedChild")
}

func TestUnprivilegedChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestPipePoolAsUnprivilegedUser as an unprivileged user")
	}
	spentQuotaScenario(t)
}

// Once the quota is spent the pool hands out no tiny pipe (streams copy
// instead), and stops asking the kernel for a while rather than paying
// pipe2, fcntl and close for every chunk; it asks again afterwards.
func spentQuotaScenario(t *testing.T) {
	if os.Getuid() == 0 {
		t.Fatal("scenario must run unprivileged")
	}
	testnet.CheckLeaks(t)
	now := time.Now()
	pool := NewPipePool(PipePoolConfig{Size: 1 << 20, MaxOpen: 1000, MaxIdle: 1000, Now: func() time.Time { return now }})
	var held []*pipe
	defer func() {
		for _, p := range held {
			pool.put(p)
		}
		pool.Trim()
	}()
	for len(held) < 1000 {
		p := pool.get()
		if p == nil {
			break
		}
		if p.size < minUsefulPipe {
			t.Fatalf("pool handed out a %d-byte pipe", p.size)
		}
		held = append(held, p)
	}
	if len(held) == 1000 {
		t.Fatal("the per-user pipe quota never ran out; is this user privileged?")
	}
	t.Logf("quota ran out after %d one-MiB pipes", len(held))
	if !now.Before(pool.starvedUntil) {
		t.Fatal("pool is not backing off after the kernel refused a pipe")
	}
	fds := countPipeFDs(t)
	if p := pool.get(); p != nil {
		t.Fatal("pool handed out a pipe while backing off")
	}
	if countPipeFDs(t) != fds || pool.Stats().Open != len(held) {
		t.Fatal("pool tried to make a pipe while backing off")
	}
	// The back-off ends; a pipe given back makes room under the quota.
	pool.put(held[len(held)-1])
	held = held[:len(held)-1]
	pool.Trim()
	now = now.Add(starveBackoff)
	p := pool.get()
	if p == nil {
		t.Fatal("no pipe after the back-off, with room under the quota")
	}
	held = append(held, p)
}
