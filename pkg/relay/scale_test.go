package relay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// connsWithinFDLimit returns how many connections through a loop fit in
// this process's fd limit, up to want, when each costs perConn fds here;
// the test is skipped when fewer than least fit.
func connsWithinFDLimit(t *testing.T, want, least, perConn int) int {
	t.Helper()
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	room := int(lim.Cur) - countFDs(t) - 256 // the test's own listeners, pollers, pipes
	n := min(want, room/perConn)
	if n < least {
		t.Skipf("RLIMIT_NOFILE %d leaves room for %d connections of %d fds, want at least %d", lim.Cur, n, perConn, least)
	}
	return n
}

// Thousands of connections on one loop, all open at once, each served and
// verified by an echo of its own.
func TestThousandsOfConnectionsOnOneLoop(t *testing.T) {
	// Each costs 4 fds in this process: the test's client, the echo
	// backend's end, and the loop's two sockets.
	n := connsWithinFDLimit(t, 3000, 1000, 4)
	echo := testnet.StartBackend(t, "echo", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{echo.Addr}}}})
	l := h.loops[0]

	conns := make([]*net.TCPConn, n)
	readers := make([]*bufio.Reader, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// Open every connection; each is served once the backend's tag line
	// comes back through the loop.
	err := parallel(n, 32, func(i int) error {
		c, err := dialTCP(h.front("p").addr)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		conns[i] = c
		c.SetDeadline(time.Now().Add(120 * time.Second))
		readers[i] = bufio.NewReaderSize(c, 64)
		if line, err := readers[i].ReadString('\n'); err != nil || line != "echo\n" {
			return fmt.Errorf("connection %d: tag line %q, %v", i, line, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Conns(); got != int64(n) {
		t.Fatalf("the loop holds %d connections, want all %d at once", got, n)
	}
	// Each connection echoes a message of its own, all of them open.
	err = parallel(n, 32, func(i int) error {
		msg := fmt.Sprintf("connection %d of %d\n", i, n)
		if _, err := io.WriteString(conns[i], msg); err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(readers[i], got); err != nil || string(got) != msg {
			return fmt.Errorf("connection %d: echo %q, %v; want %q", i, got, err, msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := h.front("p")
	if ok, failed, rejected := f.OK.Load(), f.Failed.Load(), f.Rejected.Load(); ok != int64(n) || failed != 0 || rejected != 0 {
		t.Fatalf("served %d, failed %d, rejected %d; want all %d served", ok, failed, rejected, n)
	}
	// The clients leave; the loop closes every connection.
	for i, c := range conns {
		c.Close()
		conns[i] = nil
	}
	testnet.Eventually(t, "the loop to close every connection", func() bool { return l.Conns() == 0 })
	if armed := h.timersArmed(l); armed != 0 {
		t.Fatalf("%d timers still armed with no connection left", armed)
	}
}

// A connect that hangs (the backend drops SYNs) and then times out does
// not hold up the loop: connections on the same loop keep completing
// round trips while it hangs.
func TestConnectTimeoutWhileOthersFlow(t *testing.T) {
	const connectTimeout = 3 * time.Second
	frozen := testnet.FrozenBackend(t)
	echo := testnet.StartBackend(t, "echo", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{
		{name: "frozen", backends: []string{frozen}, keys: fmt.Sprintf("connect_timeout = %q", connectTimeout)},
		{name: "echo", backends: []string{echo.Addr}},
	}})
	l, ff := h.loops[0], h.front("frozen")

	start := time.Now()
	stuck := h.dial("frozen")
	defer stuck.Close()
	testnet.Eventually(t, "the loop to dial the frozen backend", func() bool {
		dialing := false
		for _, c := range h.conns() {
			dialing = dialing || c.phase == phaseDialing
		}
		return dialing
	})

	// Small connections on the same loop, each doing round trips; those
	// completed while the frozen dial still hangs are counted.
	const clients, trips = 8, 25
	var whileHung atomic.Int64
	err := parallel(clients, clients, func(i int) error {
		c, err := dialTCP(h.front("echo").addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
		for j := range trips {
			msg := fmt.Sprintf("client %d trip %d\n", i, j)
			if _, err := io.WriteString(c, msg); err != nil {
				return err
			}
			if line, err := r.ReadString('\n'); err != nil || line != msg {
				return fmt.Errorf("client %d: echo %q, %v", i, line, err)
			}
			if ff.Failed.Load() == 0 {
				whileHung.Add(1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whileHung.Load(), int64(clients*trips); got != want {
		t.Fatalf("only %d of %d round trips completed while the frozen dial hung (%v connect timeout)", got, want, connectTimeout)
	}

	// The frozen dial times out: its client is turned away, not before
	// connect_timeout.
	if n, err := readToEnd(stuck, 30*time.Second); err != io.EOF || n != 0 {
		t.Fatalf("client of the frozen backend: %d bytes then %v, want EOF (not served)", n, err)
	}
	if el := time.Since(start); el < connectTimeout {
		t.Fatalf("client turned away after %v, before the %v connect timeout", el, connectTimeout)
	}
	if ff.Failed.Load() != 1 {
		t.Fatalf("frozen front: %d clients failed, want 1", ff.Failed.Load())
	}
	if ok, fail := ff.Pool().At(0).Dials(pool.DialClient); ok != 0 || fail != 1 {
		t.Fatalf("frozen backend: %d dials succeeded, %d failed; want the one timed out as a failure", ok, fail)
	}
	if h.front("echo").OK.Load() != clients {
		t.Fatalf("echo front served %d, want %d", h.front("echo").OK.Load(), clients)
	}
	testnet.Eventually(t, "every connection to end", func() bool { return l.Conns() == 0 })
}

// Many connect timeouts and many idle timeouts armed at once all fire:
// none is lost, none fires early.
func TestManyTimeoutsArmedAtOnceAllFire(t *testing.T) {
	const timeout = time.Second
	// The frozen connections cost 3 fds here (test client, loop's client
	// and backend sockets), the idle ones 4 (and the echo backend's end).
	n := connsWithinFDLimit(t, 1000, 200, 7)
	frozen := testnet.FrozenBackend(t)
	echo := testnet.StartBackend(t, "echo", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{
		{name: "frozen", backends: []string{frozen}, keys: fmt.Sprintf("connect_timeout = %q", timeout)},
		{name: "idle", backends: []string{echo.Addr}, keys: fmt.Sprintf("idle_timeout = %q", timeout)},
	}})
	l := h.loops[0]

	type opened struct {
		c     *net.TCPConn
		start time.Time // before the dial: no timer of its connection is older
	}
	frozenConns := make([]opened, n)
	idleConns := make([]opened, n)
	defer func() {
		for _, o := range append(frozenConns, idleConns...) {
			if o.c != nil {
				o.c.Close()
			}
		}
	}()
	// Open both sets together, so both kinds of timers are armed at once.
	err := parallel(2*n, 32, func(i int) error {
		front, slot := "frozen", &frozenConns[i/2]
		if i%2 == 1 {
			front, slot = "idle", &idleConns[i/2]
		}
		start := time.Now()
		c, err := dialTCP(h.front(front).addr)
		if err != nil {
			return err
		}
		*slot = opened{c, start}
		if front == "idle" {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			tag := make([]byte, len("echo\n"))
			if _, err := io.ReadFull(c, tag); err != nil {
				return fmt.Errorf("idle connection: tag: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every frozen client is turned away (EOF) and every idle one is cut
	// (reset); each no earlier than its timeout.
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for _, o := range []opened{frozenConns[i], idleConns[i]} {
			wg.Go(func() {
				idle := o.c == idleConns[i].c
				_, err := readToEnd(o.c, 60*time.Second)
				el := time.Since(o.start)
				switch {
				case idle && !isReset(err):
					errs <- fmt.Errorf("idle connection %d ended with %v, want a reset", i, err)
				case !idle && err != io.EOF:
					errs <- fmt.Errorf("frozen connection %d ended with %v, want EOF", i, err)
				case el < timeout:
					errs <- fmt.Errorf("connection %d (idle %v) ended after %v, before its %v timeout", i, idle, el, timeout)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if len(all) > 0 {
		t.Fatalf("%d of %d timeouts went wrong: %v", len(all), 2*n, errors.Join(all[:min(len(all), 10)]...))
	}
	testnet.Eventually(t, "the loop to close every connection", func() bool { return l.Conns() == 0 })
	if f := h.front("frozen"); f.Failed.Load() != int64(n) {
		t.Fatalf("frozen front: %d clients failed, want %d", f.Failed.Load(), n)
	}
	if _, fail := h.front("frozen").Pool().At(0).Dials(pool.DialClient); fail != int64(n) {
		t.Fatalf("frozen backend: %d dials failed, want %d", fail, n)
	}
	if f := h.front("idle"); f.OK.Load() != int64(n) {
		t.Fatalf("idle front: %d clients served, want %d", f.OK.Load(), n)
	}
	if armed := h.timersArmed(l); armed != 0 {
		t.Fatalf("%d timers still armed with no connection left", armed)
	}
}
