package splice

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// l4lb runs as an unprivileged user under systemd, where the kernel's
// per-user pipe quota (fs.pipe-user-pages-soft) applies. These tests run the
// relay as such a user: directly when the test is not root, and when it is,
// by re-running this test binary as nobody.

const childEnv = "L4LB_SPLICE_UNPRIVILEGED_CHILD"

func TestRelayAsUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		unprivilegedScenario(t)
		return
	}
	bin, dir := testnet.ExecutableCopy(t)
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{childEnv + "=1", "PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("child as uid 65534:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnprivilegedChild") {
		t.Fatalf("unprivileged relay run failed: %v", err)
	}
}

func TestUnprivilegedChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestRelayAsUnprivilegedUser as an unprivileged user")
	}
	unprivilegedScenario(t)
}

func unprivilegedScenario(t *testing.T) {
	if os.Getuid() == 0 {
		t.Fatal("scenario must run unprivileged")
	}
	t.Run("idle connections leave the pipe quota to active ones", func(t *testing.T) {
		pool := NewPipePool(PipePoolConfig{Size: 1 << 20, MaxOpen: 512, MaxIdle: 8})
		checkLeaks(t, pool)
		r := newRig(t, Config{Pipes: pool})
		// 100 idle connections: with io.Copy these would hold 200 pipes and
		// exhaust the quota (64 one-MiB pipes per user).
		for i := 0; i < 100; i++ {
			p := r.open()
			defer p.close()
			p.client.Write([]byte("x"))
			if _, err := io.ReadFull(p.backend, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
		}
		testnet.Eventually(t, "idle connections release their pipes", func() bool { return pool.Stats().Busy() == 0 })
		before, _ := r.relayer.PathBytes()
		bulk := r.open()
		defer bulk.close()
		payload := randomBytes(t, 32<<20)
		if err := exchange(bulk, payload, payload[:1<<20]); err != nil {
			t.Fatal(err)
		}
		bulk.waitResult(t)
		spliced, copied := r.relayer.PathBytes()
		// The 100 one-byte messages and a stream's first bytes are copied
		// (streamThreshold); the stream itself must splice, quota or not.
		if total := int64(len(payload) + 1<<20); spliced-before < total*9/10 {
			t.Fatalf("bulk moved %d bytes by splice and %d by copy, want at least 90%% of %d by splice", spliced-before, copied, total)
		}
	})
	t.Run("spent pipe quota degrades to copy, not to tiny pipes", func(t *testing.T) {
		pool := NewPipePool(PipePoolConfig{Size: 1 << 20, MaxOpen: 1000, MaxIdle: 1000})
		checkLeaks(t, pool)
		var held []*pipe
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
		defer func() {
			for _, p := range held {
				pool.put(p)
			}
		}()
		if len(held) == 1000 {
			t.Fatal("the per-user pipe quota never ran out; is this user privileged?")
		}
		t.Logf("quota ran out after %d one-MiB pipes", len(held))
		r := newRig(t, Config{Pipes: pool})
		p := r.open()
		defer p.close()
		payload := randomBytes(t, 4<<20)
		if err := exchange(p, payload, payload); err != nil {
			t.Fatal(err)
		}
		p.waitResult(t)
		if spliced, copied := r.relayer.PathBytes(); spliced != 0 || copied != 8<<20 {
			t.Fatalf("spliced %d copied %d, want every byte copied once no useful pipe can be had", spliced, copied)
		}
		// The pool does not retry pipe creation on every chunk while starved.
		if !time.Now().Before(pool.starvedUntil) {
			t.Fatal("pool is not backing off after the kernel refused a pipe")
		}
	})
}
