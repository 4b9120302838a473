package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The seed's demo 2 (shared/seeds/000_2de1452eb4649ee6.txt) across two
// real l4lb processes sharing one Redis: a dial that instance B began
// before instance A's breaker transitions succeeds after A has tripped,
// closed and re-tripped the backend. Its success is stale evidence (it
// captured an older generation) and must leave the breaker open at A's
// latest trip, in Redis and on both instances.
//
// Everything runs in a network namespace of the test's own (the test
// binary re-runs itself inside it, as pkg/pool's netns test does): a
// redis-server, one echo backend, instance A as root and instance B as
// uid 65534. nft rules in the namespace's output hook tell the two
// instances' dials apart by the socket's owner (meta skuid): B's SYNs to
// the backend are dropped (B's dial stays in flight, retransmitting),
// A's are answered with a TCP reset while A is to fail (fast refusals).
// Deleting B's rule lets B's next SYN retransmission connect.
//
// Two rounds: in the first B's dial is a client dial captured while the
// breaker was closed (generation N); in the second it is a force-try
// (breaker rule 6, B's only backend open) captured at an open generation,
// the case in which a success would count as recovery if it were not
// judged by its generation: exactly the seed's in-flight request that
// closed a breaker re-opened meanwhile.

const fleetNetnsEnv = "L4LB_FLEET_NETNS_CHILD"

func TestFleetStaleSuccessAcrossProcessesLeavesBreakerOpen(t *testing.T) {
	// The headline across a fleet: it never skips silently.
	testnet.RequireNetns(t, "ss")
	ns := fmt.Sprintf("l4lbf-%d-%d", os.Getpid(), fleetNetnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("cannot make a network namespace here: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	fleetRun(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, self,
		"-test.run=^TestFleetSeedChild$", "-test.v", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), fleetNetnsEnv+"=1")
	// The child, its redis-server and its l4lb processes are one process
	// group: whatever happens to the child, none outlives this test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers of the child's group, if any
	t.Logf("inside namespace %s:\n%s", ns, out)
	if strings.Contains(string(out), "--- SKIP: TestFleetSeedChild") {
		t.Skip("the scenario skipped inside the namespace (see its output)")
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFleetSeedChild") {
		t.Fatalf("scenario failed: %v", err)
	}
}

var fleetNetnsSeq atomic.Int64

// fleetRun runs a command, failing the test on error.
func fleetRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// fleetNft runs one nft command given as one string.
func fleetNft(t *testing.T, cmd string) {
	t.Helper()
	fleetRun(t, "nft", strings.Fields(cmd)...)
}

// fleetLate is a client connection whose backend dial is held in flight:
// the tag line it eventually reads.
type fleetLate struct {
	c    net.Conn
	done chan fleetLateResult
}

type fleetLateResult struct {
	line string
	err  error
	at   time.Time
}

func startFleetLate(t *testing.T, addr string) *fleetLate {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l := &fleetLate{c: c, done: make(chan fleetLateResult, 1)}
	t.Cleanup(func() { c.Close() })
	go func() {
		c.SetReadDeadline(time.Now().Add(90 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		l.done <- fleetLateResult{line, err, time.Now()}
	}()
	return l
}

// pending fails the test if the held client already has its answer.
func (l *fleetLate) pending(t *testing.T, when string) {
	t.Helper()
	select {
	case r := <-l.done:
		t.Fatalf("%s: B's held dial ended already: %q %v", when, r.line, r.err)
	default:
	}
}

// fleetTag connects to addr and reads the tag line of the backend that
// answered; an error when the connection ends without one.
func fleetTag(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// synSent counts the sockets of the namespace in SYN-SENT towards port.
func synSent(t *testing.T, port string) int {
	t.Helper()
	out, err := exec.Command("ss", "-Htn", "state", "syn-sent", "( dport = :"+port+" )").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	n := 0
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

func TestFleetSeedChild(t *testing.T) {
	if os.Getenv(fleetNetnsEnv) == "" {
		t.Skip("run by TestFleetStaleSuccessAcrossProcessesLeavesBreakerOpen inside its namespace")
	}
	testnet.CheckLeaks(t)
	srv := testnet.StartRedis(t)
	backend := testnet.StartBackend(t, "b", "127.0.0.1:0")
	addr := backend.Addr
	port := addr[strings.LastIndex(addr, ":")+1:]

	// B runs as nobody: a copy of l4lb any user may run, its
	// configuration beside it.
	bin, dir := testnet.CopyExecutable(t, l4lbBin)
	// One backend, no retries: every dial of A's clients is one breaker
	// dial. A minute's cooldown: no probe runs during the test (B's would
	// hang on its SYNs and hold the fleet's probe lock); A closes by its
	// force-tries, which the all-down pool makes (rule 6). B's connect
	// timeout outlasts every round by far: its held SYN retransmits at 1,
	// 3, 7, 15 and 31 s.
	poolKeys := "retries = 0\nconnect_timeout = \"40s\""
	breakerKeys := "failures = 3\nwindow = \"120s\"\ncooldown = \"60s\"\nmax_cooldown = \"60s\""
	a := startFleetInstance(t, bin, nil, dir, srv.URL(), "fleet-a", []string{addr}, poolKeys, breakerKeys)
	b := startFleetInstance(t, bin, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}},
		dir, srv.URL(), "fleet-b", []string{addr}, poolKeys, breakerKeys)
	openS, genS := fleetSeries("l4lb_breaker_open", addr), fleetSeries("l4lb_breaker_generation", addr)
	staleS := fleetSeries("l4lb_breaker_stale_results_total", addr)
	forceOK := fmt.Sprintf("l4lb_backend_dials_total{backend=%q,kind=\"force\",pool=\"p\",result=\"success\"}", addr)
	clientOK := fmt.Sprintf("l4lb_backend_dials_total{backend=%q,kind=\"client\",pool=\"p\",result=\"success\"}", addr)

	// Both serve, closed at generation 0.
	for _, in := range []*fleetInstance{a, b} {
		if tag, err := fleetTag(in.listen); err != nil || tag != "b" {
			t.Fatalf("instance %s before the scenario: %q %v", in.name, tag, err)
		}
		if o, g := in.mustMetric(t, openS), in.mustMetric(t, genS); o != 0 || g != 0 {
			t.Fatalf("instance %s starts open %v at generation %v, want closed at 0", in.name, o, g)
		}
	}

	fleetNft(t, "add table inet l4lbf")
	t.Cleanup(func() { exec.Command("nft", "delete", "table", "inet", "l4lbf").Run() })
	fleetNft(t, "add chain inet l4lbf holdb { type filter hook output priority 0 ; }")
	fleetNft(t, "add chain inet l4lbf refusea { type filter hook output priority 1 ; }")
	syn := "tcp dport " + port + " tcp flags & (syn|ack) == syn"
	holdB := func() { fleetNft(t, "add rule inet l4lbf holdb meta skuid 65534 "+syn+" drop") }
	releaseB := func() { fleetNft(t, "flush chain inet l4lbf holdb") }
	refuseA := func() { fleetNft(t, "add rule inet l4lbf refusea meta skuid 0 "+syn+" reject with tcp reset") }
	admitA := func() { fleetNft(t, "flush chain inet l4lbf refusea") }

	redisAt := func(gen uint64, open bool) bool {
		g, o := fleetRedisGen(t, srv, addr)
		return g == strconv.FormatUint(gen, 10) && (open == strings.HasPrefix(o, g+" "))
	}
	// tripA makes A's clients fail until A trips the breaker from
	// generation gen (gen+1 in Redis).
	tripA := func(gen uint64) {
		t.Helper()
		refuseA()
		for i := 0; !redisAt(gen+1, true); i++ {
			if i == 50 {
				g, o := fleetRedisGen(t, srv, addr)
				t.Fatalf("A did not trip from generation %d after 50 refused clients: Redis gen %q open %q", gen, g, o)
			}
			if tag, err := fleetTag(a.listen); err == nil {
				t.Fatalf("A's client reached %q through the reset rule", tag)
			}
		}
	}
	// closeA lets A's dials through: A's clients force-try the backend
	// (its only one, open) and the first success closes the breaker of
	// generation gen (gen+1 in Redis).
	closeA := func(gen uint64) {
		t.Helper()
		admitA()
		for i := 0; !redisAt(gen+1, false); i++ {
			if i == 50 {
				g, o := fleetRedisGen(t, srv, addr)
				t.Fatalf("A's force-tries did not close generation %d: Redis gen %q open %q", gen, g, o)
			}
			if tag, err := fleetTag(a.listen); err != nil || tag != "b" {
				t.Fatalf("A's force-try client: %q %v, want the backend", tag, err)
			}
		}
	}
	// hold starts a client of B whose dial to the backend stays in flight.
	hold := func() (*fleetLate, time.Time) {
		t.Helper()
		holdB()
		before := synSent(t, port)
		l := startFleetLate(t, b.listen)
		testnet.Eventually(t, "B's dial in SYN-SENT", func() bool { return synSent(t, port) == before+1 })
		return l, time.Now()
	}
	// release lets B's held dial's next SYN retransmission through and
	// waits for its client to be relayed.
	release := func(l *fleetLate) time.Time {
		t.Helper()
		releaseB()
		var r fleetLateResult
		select {
		case r = <-l.done:
		case <-time.After(60 * time.Second):
			t.Fatal("B's held dial never connected")
		}
		if r.err != nil || r.line != "b\n" {
			t.Fatalf("B's held client got %q (%v), want its dial to connect and be relayed", r.line, r.err)
		}
		l.c.Close()
		return r.at
	}
	// settled checks the end of a round: Redis still open at gen, both
	// instances open at gen, B's stale count up by one.
	settled := func(round string, gen uint64, staleBefore float64) {
		t.Helper()
		testnet.Eventually(t, round+": B to count its late success stale", func() bool {
			v, ok := b.metric(staleS)
			return (ok && v >= staleBefore+1) || !redisAt(gen, true)
		})
		for _, in := range []*fleetInstance{a, b} {
			testnet.Eventually(t, round+": instance "+in.name+" open at generation "+strconv.FormatUint(gen, 10), func() bool {
				o, ok1 := in.metric(openS)
				g, ok2 := in.metric(genS)
				return ok1 && ok2 && o == 1 && g == float64(gen)
			})
		}
		if !redisAt(gen, true) {
			g, o := fleetRedisGen(t, srv, addr)
			t.Fatalf("%s: B's late success changed the fleet's breaker: Redis gen %q open %q, want open at %d", round, g, o, gen)
		}
		if v := b.mustMetric(t, staleS); v != staleBefore+1 {
			t.Fatalf("%s: B's stale results %v, want %v", round, v, staleBefore+1)
		}
		// A may count stale results of its own: a force-try of a client
		// that began before the close its predecessor asked for had
		// landed (the close is made off the event loop).
		t.Logf("%s: stale results on A %v, on B %v", round, a.mustMetric(t, staleS), b.mustMetric(t, staleS))
	}

	// Round 1: B's client dial captures generation 0, closed.
	clientOKBefore := b.mustMetric(t, clientOK)
	late, held := hold()
	tripA(0)  // 1: open
	closeA(1) // 2: closed
	tripA(2)  // 3: open
	b.waitMetric(t, genS, "round 1: B to follow A's transitions", func(v float64) bool { return v == 3 })
	late.pending(t, "round 1, after A's trip, close and trip")
	sequenceDone := time.Since(held)
	connected := release(late)
	settled("round 1", 3, 0)
	if v := b.mustMetric(t, clientOK); v != clientOKBefore+1 {
		t.Fatalf("round 1: B's successful client dials %v, want %v (the held one)", v, clientOKBefore+1)
	}
	if !strings.Contains(b.p.stderr.String(), "generation=0 current_generation=3") {
		t.Errorf("round 1: no debug line of B's stale result (generation 0, current 3)")
	}
	t.Logf("round 1: A tripped, closed and re-tripped within %v of B's dial; B's dial connected %v after it began; Redis open at 3",
		sequenceDone.Round(time.Millisecond), connected.Sub(held).Round(time.Millisecond))

	// Round 2: B's only backend is open, so B's client force-tries it: the
	// dial captures the open generation 3. A then closes (4) and trips
	// again (5) before B's success arrives.
	forceBefore := b.mustMetric(t, forceOK)
	late, held = hold()
	closeA(3) // 4: closed
	tripA(4)  // 5: open
	b.waitMetric(t, genS, "round 2: B to follow A's transitions", func(v float64) bool { return v == 5 })
	late.pending(t, "round 2, after A's close and trip")
	sequenceDone = time.Since(held)
	connected = release(late)
	settled("round 2", 5, 1)
	if v := b.mustMetric(t, forceOK); v != forceBefore+1 {
		t.Fatalf("round 2: B's successful force-tries %v, want %v (the held one)", v, forceBefore+1)
	}
	if !strings.Contains(b.p.stderr.String(), "generation=3 current_generation=5") {
		t.Errorf("round 2: no debug line of B's stale result (generation 3, current 5)")
	}
	t.Logf("round 2: A closed and re-tripped within %v of B's force-try; B's force-try connected %v after it began; Redis open at 5",
		sequenceDone.Round(time.Millisecond), connected.Sub(held).Round(time.Millisecond))
}
