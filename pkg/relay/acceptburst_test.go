package relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// acceptLog is what a loop's listening sockets of one front did: the loop
// turn of each accept call, and how many calls found the queue empty.
// The loop writes it; read it on the loop.
type acceptLog struct {
	turns []uint64
	empty int
}

// recordAccepts makes l's sockets of front log their accept calls (on top
// of whatever accept they use now: failFirst's, say).
func recordAccepts(h *harness, l *Loop, front string) *acceptLog {
	h.t.Helper()
	a := &acceptLog{}
	h.on(l, func() {
		for _, s := range l.lsocks {
			if s.f.Name != front {
				continue
			}
			inner := s.accept
			s.accept = func(fd int) (int, netip.AddrPort, error) {
				cfd, src, err := inner(fd)
				a.turns = append(a.turns, l.r.Turn())
				if err == unix.EAGAIN {
					a.empty++
				}
				return cfd, src, err
			}
		}
	})
	return a
}

// read returns the calls logged so far, the empty ones, and the accepts
// of each turn that made any, in order.
func (a *acceptLog) read(h *harness, l *Loop) (calls, empty int, perTurn []int) {
	h.t.Helper()
	h.on(l, func() {
		calls, empty = len(a.turns), a.empty
		for i, turn := range a.turns {
			if i == 0 || turn != a.turns[i-1] {
				perTurn = append(perTurn, 0)
			}
			perTurn[len(perTurn)-1]++
		}
	})
	return calls, empty, perTurn
}

// echoes checks that c reached backend "b" (its tag line) and that
// payload comes back from it whole.
func echoes(c *net.TCPConn, payload []byte) error {
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	if tag, err := r.ReadString('\n'); err != nil || tag != "b\n" {
		return fmt.Errorf("backend tag %q, %v; want \"b\\n\"", tag, err)
	}
	if _, err := c.Write(payload); err != nil {
		return err
	}
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(r, got); err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if !bytes.Equal(got, payload) {
		return errors.New("the echo differs from what was sent")
	}
	return nil
}

// One client at a time (the sni bench's pattern): each readiness report
// is one client, and the loop accepts it with one accept4, not a second
// that says EAGAIN (the listening socket is level-triggered: were more
// queued, epoll would report it again).
func TestOneClientAtATimeCostsOneAcceptEach(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{be.Addr}}}})
	l := h.loops[0]
	a := recordAccepts(h, l, "p")
	const n = 50
	payload := randomBytes(t, 4<<10)
	for i := range n {
		c := h.dial("p")
		err := echoes(c, payload)
		c.Close()
		if err != nil {
			t.Fatalf("client %d of %d: %v", i+1, n, err)
		}
	}
	if calls, empty, _ := a.read(h, l); calls != n || empty != 0 {
		t.Fatalf("%d accept calls (%d of them EAGAIN) for %d clients one at a time, want %d (none EAGAIN)", calls, empty, n, n)
	}
}

// A storm: clients queued while the loop was busy are all accepted and
// relayed, none left in the queue, in bursts that grow from one (the
// first turn cannot tell a storm from one client) up to acceptBatch, so
// in far fewer turns than clients.
func TestAcceptStormIsServedInGrowingBursts(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{be.Addr}}}})
	l := h.loops[0]
	a := recordAccepts(h, l, "p")
	n := 200
	h.on(l, func() {
		if info, err := unix.GetsockoptTCPInfo(l.lsocks[0].fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = min(n, int(info.Sacked)) // a listener's backlog: a queue past it drops SYNs
		}
	})
	release := h.hold(l)
	clients := make([]*net.TCPConn, n)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := parallel(n, 16, func(i int) (err error) {
		clients[i], err = dialTCP(h.front("p").addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the clients to wait in the accept queue", func() bool { return acceptQueued(l) == n })
	release()
	payload := randomBytes(t, 1<<10)
	if err := parallel(n, 16, func(i int) error {
		if err := echoes(clients[i], payload); err != nil {
			return fmt.Errorf("client %d of %d: %w", i+1, n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if q := acceptQueued(l); q != 0 {
		t.Errorf("%d clients still queued after all %d were served", q, n)
	}
	calls, empty, perTurn := a.read(h, l)
	accepted := calls - empty
	if accepted != n {
		t.Errorf("%d accepts for %d clients", accepted, n)
	}
	t.Logf("%d clients accepted in bursts of %v", n, perTurn)
	if biggest := maxOf(perTurn); len(perTurn) > n/4 || biggest < 8 {
		t.Errorf("%d clients accepted in %d turns (%v), the biggest burst %d; want at most %d turns, a burst of 8 or more",
			n, len(perTurn), perTurn, biggest, n/4)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// Out of fds, a listening socket backs off; level-triggered, with a
// client queued it would be reported at every wait and spin its loop, so
// it leaves the epoll set until its retry, and rejoins once accepting
// works: the loop handles a few events over a back-off of 315 ms, not
// one per wait, makes one accept call per retry, and then serves the
// client.
func TestBackingOffListenerDoesNotSpinItsLoop(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{be.Addr}}}})
	l := h.loops[0]
	const failures = 6 // back-offs of 5, 10, 20, 40, 80 and 160 ms
	errs := make([]error, failures)
	for i := range errs {
		errs[i] = unix.EMFILE
	}
	h.on(l, func() { failFirst(l, "p", errs...) })
	a := recordAccepts(h, l, "p")
	var before uint64
	h.on(l, func() { before = l.r.Stats().Events })
	c := h.dial("p")
	defer c.Close()
	if err := echoes(c, []byte("ping")); err != nil {
		t.Fatalf("after the back-off: %v", err)
	}
	var events uint64
	h.on(l, func() { events = l.r.Stats().Events - before })
	// A spinning loop handles an event per wait, tens of thousands in
	// 315 ms; this client's accept and relay take about ten.
	if events > 200 {
		t.Errorf("the loop handled %d events while its listener backed off for 315 ms: it spun", events)
	}
	if calls, empty, _ := a.read(h, l); calls != failures+1 || empty != 0 {
		t.Errorf("%d accept calls (%d EAGAIN), want %d: one per retry, then the client", calls, empty, failures+1)
	}
	if got := h.front("p").AcceptErrors.Load(); got != failures {
		t.Errorf("%d accept errors counted, want %d", got, failures)
	}
}

// A socket that an upgrade hands to another process while it backs off
// stays out of the epoll set when its retry fires: the queue is the other
// process's to serve.
func TestBackingOffListenerHandedOverStaysOut(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{be.Addr}}}})
	l := h.loops[0]
	// In the turn that finds the client queued, the accept fails and the
	// socket backs off; the hand-over's task runs in the next turn, ahead
	// of any timer.
	clients := queuedClients(t, h, l, "p", 1, func() {
		failFirst(l, "p", unix.EMFILE)
		l.lsocks[0].acceptAll()
		l.UnwatchListeners()
	})
	defer clients[0].Close()
	if got := h.front("p").AcceptErrors.Load(); got != 1 {
		t.Fatalf("%d accept errors, want the one that started the back-off", got)
	}
	var resting bool
	testnet.Eventually(t, "the retry to fire", func() bool {
		h.on(l, func() { s := l.lsocks[0]; resting = s.unwatched && !s.retry.Armed() })
		return resting
	})
	// Were the socket back in the set, the wait after the retry would
	// accept: let the turns that follow it run.
	h.on(l, func() {})
	h.on(l, func() {})
	if q, held := acceptQueued(l), l.Conns(); q != 1 || held != 0 {
		t.Fatalf("after the retry: %d queued, %d held; want the client left queued", q, held)
	}
}
