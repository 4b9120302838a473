package relay

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/splice"
)

// l4lb runs as an unprivileged user under systemd, where the kernel's
// per-user pipe quota (fs.pipe-user-pages-soft) applies. These tests run
// the loop as such a user: directly when the test is not root, and when it
// is, by re-running this test binary as an unprivileged uid of its own.
// The quota is per user: a uid no other test uses keeps what this test
// spends apart from tests running at the same time (pkg/splice's child,
// cmd's tests that run l4lb as nobody).

const childUID = 65531

const childEnv = "L4LB_LOOP_UNPRIVILEGED_CHILD"

func TestLoopAsUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		unprivilegedScenario(t)
		return
	}
	testnet.RunChildAs(t, childUID, childEnv, "TestUnprivilegedChild")
}

func TestUnprivilegedChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestLoopAsUnprivilegedUser as an unprivileged user")
	}
	unprivilegedScenario(t)
}

func unprivilegedScenario(t *testing.T) {
	if os.Getuid() == 0 {
		t.Fatal("scenario must run unprivileged")
	}
	t.Run("idle connections leave the pipe quota to active ones", func(t *testing.T) {
		k := testnet.StartTaker(t)
		pipes := splice.NewPipePool(splice.PipePoolConfig{Size: 1 << 20, MaxOpen: 512, MaxIdle: 8})
		h := newHarness(t, harnessOpts{pipes: pipes, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
		// 100 connections that moved a stream each way and now sit idle:
		// holding a pipe per direction, as io.Copy does, they would hold
		// 200 pipes and exhaust the quota (64 one-MiB pipes per user).
		for range 100 {
			p := h.open("p", k)
			defer p.close()
			if err := exchangeOpen(p, randomBytes(t, 256<<10), randomBytes(t, 256<<10)); err != nil {
				t.Fatal(err)
			}
		}
		testnet.Eventually(t, "idle connections release their pipes", func() bool { return pipes.Stats().Busy() == 0 })
		before := h.sh.Spliced.Load()
		if before == 0 {
			t.Fatal("the connections never spliced: the test does not show what they hold once idle")
		}
		bulk := h.open("p", k)
		defer bulk.close()
		payload := randomBytes(t, 32<<20)
		if err := exchange(bulk, payload, payload[:1<<20]); err != nil {
			t.Fatal(err)
		}
		// A stream's first bytes are copied (the stream threshold); the
		// stream itself must splice, quota or not.
		total := int64(len(payload) + 1<<20)
		testnet.Eventually(t, "the bulk's bytes to be counted", func() bool {
			return h.sh.Spliced.Load()-before >= total*9/10
		})
	})

	t.Run("spent pipe quota degrades to copy, not to tiny pipes", func(t *testing.T) {
		testnet.CheckLeaks(t)
		// Spend the quota: 1 MiB pipes until the kernel refuses to size
		// one (past fs.pipe-user-pages-soft, an unprivileged user's new
		// pipes get one page).
		var held []int
		t.Cleanup(func() {
			for _, fd := range held {
				unix.Close(fd)
			}
		})
		for len(held) < 2000 {
			var fds [2]int
			if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			held = append(held, fds[0], fds[1])
			if _, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, 1<<20); err != nil {
				break
			}
		}
		if len(held) >= 2000 {
			t.Fatal("the per-user pipe quota never ran out; is this user privileged?")
		}
		t.Logf("quota ran out after %d one-MiB pipes", len(held)/2-1)

		k := testnet.StartTaker(t)
		pipes := splice.NewPipePool(splice.PipePoolConfig{Size: 1 << 20, MaxOpen: 1000, MaxIdle: 1000})
		h := newHarness(t, harnessOpts{pipes: pipes, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
		p := h.open("p", k)
		defer p.close()
		payload := randomBytes(t, 4<<20)
		if err := exchange(p, payload, payload); err != nil {
			t.Fatal(err)
		}
		testnet.Eventually(t, "every byte to be counted", func() bool {
			return h.sh.Spliced.Load()+h.sh.Copied.Load() == 8<<20
		})
		if spliced, copied := h.sh.Spliced.Load(), h.sh.Copied.Load(); spliced != 0 || copied != 8<<20 {
			t.Fatalf("spliced %d copied %d, want every byte copied once no useful pipe can be had", spliced, copied)
		}
		if s := pipes.Stats(); s.Open != 0 {
			t.Fatalf("the pool holds %d pipes although the kernel only gives tiny ones", s.Open)
		}
	})
}
