package pool_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The seed scenario on real sockets: a dial starts, its SYN is lost, the
// backend then refuses enough dials to trip the breaker, and the first
// dial's retransmitted SYN finally gets through. That success is stale
// evidence and must leave the breaker open.
//
// The dials are l4lb's own: clients connect to its listener and its event
// loop dials the backend (BeginDial captures the generation before the
// non-blocking connect(2)).
//
// It runs in a network namespace of its own (traffic stays on that
// namespace's loopback) so the nft rules touch nothing else: the test
// binary re-runs itself inside it.

const netnsChildEnv = "L4LB_NETNS_CHILD"

func TestLateSuccessOfPreTripDialLeavesBreakerOpen(t *testing.T) {
	// The mission's headline: it never skips silently.
	testnet.RequireNetns(t, "ss")
	ns := fmt.Sprintf("l4lbt-%d", os.Getpid())
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, self, "-test.run=^TestLateSYNChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("inside namespace %s:\n%s", ns, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLateSYNChild") {
		t.Fatalf("scenario failed: %v", err)
	}
}

func TestLateSYNChild(t *testing.T) {
	if os.Getenv(netnsChildEnv) == "" {
		t.Skip("run by TestLateSuccessOfPreTripDialLeavesBreakerOpen inside its namespace")
	}
	backend := testnet.StartBackend(t, "b", "127.0.0.1:0")
	port := backend.Addr[strings.LastIndex(backend.Addr, ":")+1:]
	p := newLB(t, []string{backend.Addr},
		"algorithm = \"round-robin\"\nretries = 0\nconnect_timeout = \"20s\"\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\nfailures = 3\ncooldown = \"120s\"")
	b := p.Backends()[0]

	run(t, "nft", "add table inet l4lbt")
	t.Cleanup(func() { exec.Command("nft", "delete table inet l4lbt").Run() })
	run(t, "nft", "add chain inet l4lbt in { type filter hook input priority 0 ; }")
	synTo := "tcp dport " + port + " tcp flags & (syn|ack) == syn"
	run(t, "nft", "add rule inet l4lbt in "+synTo+" drop")

	// Dial A: client A's dial captures generation 0, its SYN is dropped.
	type result struct {
		line string
		err  error
	}
	clientA := p.dial(t)
	defer clientA.Close()
	late := make(chan result, 1)
	go func() {
		clientA.SetReadDeadline(time.Now().Add(60 * time.Second))
		line, err := bufio.NewReader(clientA).ReadString('\n')
		late <- result{line, err}
	}()
	var sport string
	testnet.Eventually(t, "dial A in SYN-SENT", func() bool {
		out, _ := exec.Command("ss", "-Htn", "state", "syn-sent", "( dport = :"+port+" )").Output()
		fields := strings.Fields(string(out))
		if len(fields) < 4 {
			return false
		}
		local := fields[len(fields)-2]
		sport = local[strings.LastIndex(local, ":")+1:]
		return true
	})
	if b.Active() != 1 {
		t.Fatalf("dial A in flight counts %d on the backend, want 1", b.Active())
	}

	// Keep dropping A's retransmissions; refuse every other dial.
	run(t, "nft", "flush chain inet l4lbt in")
	run(t, "nft", "add rule inet l4lbt in tcp sport "+sport+" tcp dport "+port+" drop")
	run(t, "nft", "add rule inet l4lbt in "+synTo+" reject with tcp reset")
	for i := 0; i < 2; i++ {
		if got := connect(t, p); got != "" {
			t.Fatalf("client %d reached %q through the reject rule", i, got)
		}
	}
	// The third refused dial trips the breaker; its client, whose pool is
	// all down now, has its one force-try (refused too: a fresh one
	// passing later would close the breaker, which is not what this test
	// is about), then waits for recovery within its budget: it leaves.
	third := p.dial(t)
	testnet.Eventually(t, "the third refused dial and its client's force-try", func() bool {
		_, f := b.Dials(pool.DialClient)
		_, ff := b.Dials(pool.DialForce)
		return f == 3 && ff == 1
	})
	if st := b.Breaker(); !st.Open || st.Generation != 1 {
		third.Close()
		t.Fatalf("after 3 refused dials: %+v, want open at generation 1", st)
	}
	third.Close()
	select {
	case r := <-late:
		t.Fatalf("dial A ended before its SYN was let through: %+v", r)
	default:
	}

	// Allow: A's next SYN retransmission connects.
	run(t, "nft", "flush chain inet l4lbt in")
	var r result
	select {
	case r = <-late:
	case <-time.After(30 * time.Second):
		t.Fatal("dial A never connected")
	}
	if r.err != nil || r.line != "b\n" {
		t.Fatalf("client A got %q (%v), want dial A to connect and be relayed", r.line, r.err)
	}
	clientA.Close()
	p.idle(t)
	if ok, _ := b.Dials(pool.DialClient); ok != 1 {
		t.Fatalf("%d successful client dials, want dial A's", ok)
	}
	if st := b.Breaker(); !st.Open || st.Generation != 1 {
		t.Fatalf("late success of a pre-trip dial changed the breaker: %+v", st)
	}
	if n := b.StaleResults(); n != 1 {
		t.Fatalf("stale results %d, want 1 (dial A)", n)
	}
	t.Logf("dial A (source port %s) connected after the trip; breaker stays open, counted stale", sport)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if len(args) == 1 && name == "nft" {
		args = strings.Fields(args[0])
	}
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
