package splice

import (
	"os"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The pool caps the pipes in existence; a loop's cache keeps at most its
// share of MaxIdle of them idle, and closes the rest; closing the cache
// closes its idle pipes.
func TestPipePoolCapsAndKeepsIdle(t *testing.T) {
	testnet.CheckLeaks(t)
	before := countPipeFDs(t)
	pool := NewPipePool(PipePoolConfig{Size: 64 << 10, MaxOpen: 3, MaxIdle: 1})
	c := pool.NewCache()
	var ps []*pipe
	for range 3 {
		p := c.get()
		if p == nil {
			t.Fatal("no pipe under the cap")
		}
		ps = append(ps, p)
	}
	if p := c.get(); p != nil {
		t.Fatal("a pipe past the cap")
	}
	if got := countPipeFDs(t) - before; got != 6 {
		t.Fatalf("%d pipe fds for 3 pipes", got)
	}
	c.put(ps[0]) // kept idle
	c.put(ps[1]) // past MaxIdle: closed
	c.Publish()  // as its loop does once per wake-up
	if s := pool.Stats(); s.Open != 2 || s.Idle != 1 || s.Busy() != 1 {
		t.Fatalf("stats %+v, want 2 open, 1 idle", s)
	}
	if p := c.get(); p != ps[0] {
		t.Fatal("the idle pipe was not handed out again")
	}
	c.discard(ps[0]) // held bytes: closed, never reused
	c.put(ps[2])
	c.Publish()
	if s := pool.Stats(); s.Open != 1 || s.Idle != 1 {
		t.Fatalf("stats %+v, want the one pipe given back idle", s)
	}
	c.Close()
	if s := pool.Stats(); s.Open != 0 || s.Idle != 0 {
		t.Fatalf("stats %+v after the cache closed, want nothing open", s)
	}
	if got := countPipeFDs(t); got != before {
		t.Fatalf("%d pipe fds left, %d before", got, before)
	}
}

// Loops share MaxIdle: each cache keeps its share idle. At the pool's cap
// a cache keeps nothing idle while other loops may want a pipe: one
// loop's idle pipes must not leave another copying.
func TestPipeCachesShareTheIdleCapAndYieldAtTheCap(t *testing.T) {
	testnet.CheckLeaks(t)
	before := countPipeFDs(t)
	pool := NewPipePool(PipePoolConfig{Size: 64 << 10, MaxOpen: 8, MaxIdle: 4})
	a, b := pool.NewCache(), pool.NewCache()
	defer a.Close()
	defer b.Close()
	var ps []*pipe
	for range 4 {
		ps = append(ps, a.get())
	}
	for _, p := range ps {
		a.put(p)
	}
	a.Publish()
	if s := pool.Stats(); s.Open != 2 || s.Idle != 2 {
		t.Fatalf("stats %+v: want a's share of 2 idle kept, the rest closed", s)
	}
	// Take every pipe the cap allows, then give one back at the cap.
	ps = ps[:0]
	for {
		p := a.get()
		if p == nil {
			break
		}
		ps = append(ps, p)
	}
	if len(ps) != 8 {
		t.Fatalf("%d pipes under a cap of 8", len(ps))
	}
	a.put(ps[0])
	if p := b.get(); p == nil {
		t.Fatal("the other loop gets no pipe: a pipe given back at the cap was kept idle")
	} else {
		ps[0] = p
		b.put(p)
	}
	for _, p := range ps[1:] {
		a.put(p)
	}
	a.Close()
	b.Close()
	if s := pool.Stats(); s.Open != 0 {
		t.Fatalf("stats %+v after both caches closed, want nothing open", s)
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
// test spends apart from tests running at the same time (pkg/relay's child,
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
	c := pool.NewCache()
	var held []*pipe
	defer func() {
		for _, p := range held {
			c.put(p)
		}
		c.Close()
	}()
	for len(held) < 1000 {
		p := c.get()
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
	if pool.starvedUntil.Load() == 0 {
		t.Fatal("pool is not backing off after the kernel refused a pipe")
	}
	fds := countPipeFDs(t)
	if p := c.get(); p != nil {
		t.Fatal("pool handed out a pipe while backing off")
	}
	if countPipeFDs(t) != fds || pool.Stats().Open != len(held) {
		t.Fatal("pool tried to make a pipe while backing off")
	}
	// The back-off ends; a pipe given back makes room under the quota.
	c.discard(held[len(held)-1])
	held = held[:len(held)-1]
	now = now.Add(starveBackoff - 1)
	if p := c.get(); p != nil {
		t.Fatal("pool handed out a pipe before the back-off ended")
	}
	now = now.Add(1)
	p := c.get()
	if p == nil {
		t.Fatal("no pipe after the back-off, with room under the quota")
	}
	held = append(held, p)
}
