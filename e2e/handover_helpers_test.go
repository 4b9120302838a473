package e2e

// What the hand-over tests (handover_*_test.go) share: an l4lb followed
// through its upgrades, the five seconds an old process may outlive its
// upgrade, a backend the test drives by hand, the fd limit, and the log
// lines the hand-over writes. The tests are of issue 27: an upgrade hands
// every established connection and UDP session to the new process, which
// relays them on with no byte lost and no reset, and the old process exits
// in seconds.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// oldProcessExit is how long an upgrade's old process may outlive the
// moment its successor serves: once it has handed its connections over it
// has nothing left to wait for (issue 27: "seconds, whatever the
// connections' lifetimes").
const oldProcessExit = 5 * time.Second

// The hand-over's log lines (the messages are exact).
const (
	logHandedOver = "upgrade: handed over established connections"
	logAdopted    = "upgrade: adopted connections from the old process"
	logStaysHere  = "upgrade: the new process does not adopt connections; they stay here and drain"
)

// upgradeChain is an l4lb run with a pid file, followed through its
// binary upgrades: the pid serving now, every generation's (each killed
// when the test ends), and the log every generation writes to.
type upgradeChain struct {
	logText func() string
	pidfile string
	pid     int   // the process serving now
	pids    []int // every generation, first to last
}

// startChain starts bin (an l4lb) with config, its output in a file, and
// waits until it serves.
func startChain(t *testing.T, bin, config string) *upgradeChain {
	t.Helper()
	exitAtOnce(t)
	pidfile := filepath.Join(t.TempDir(), "l4lb.pid")
	p := startLogged(t, bin, "-config", config, "-pidfile", pidfile)
	waitPIDFile(t, p, pidfile)
	return followChain(t, p.cmd.Process.Pid, pidfile, p.logText)
}

// exitAtOnce makes the l4lb processes the test starts from now on exit
// when they are done: built with the race detector, a process sleeps a
// second as it exits (GORACE's atexit_sleep_ms), which would count
// against an old process's five seconds and delay when l4lb upgrade says
// the new process serves. A race is reported when it is found, not at
// exit.
func exitAtOnce(t *testing.T) {
	if raceEnabled {
		t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
}

// followChain follows pid, an l4lb serving with -pidfile pidfile, whose
// output logText reads. Its successors are not the test's children: they
// are killed by pid when the test ends. Built with the race detector, no
// generation may have reported a data race (the hand-over moves
// connections between loops and processes).
func followChain(t *testing.T, pid int, pidfile string, logText func() string) *upgradeChain {
	c := &upgradeChain{logText: logText, pidfile: pidfile, pid: pid, pids: []int{pid}}
	t.Cleanup(func() {
		if strings.Contains(logText(), "WARNING: DATA RACE") {
			t.Error("an l4lb of the test reported a data race (its log follows)")
		}
		for _, pid := range c.pids[1:] {
			if !processGone(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return c
}

// upgrade runs `l4lb upgrade -pidfile` (the build's l4lb: the path may hold
// another) and returns the old pid and when the new process served.
func (c *upgradeChain) upgrade(t *testing.T) (old int, served time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, l4lbBin, "upgrade", "-pidfile", c.pidfile, "-wait", "60s").CombinedOutput()
	served = time.Now()
	if err != nil {
		t.Fatalf("l4lb upgrade of pid %d: %v\n%s", c.pid, err, out)
	}
	return c.follow(t), served
}

// signalUpgrade sends the serving process SIGUSR2 and waits until its
// successor serves; it returns the old pid and when the new one served.
func (c *upgradeChain) signalUpgrade(t *testing.T) (old int, served time.Time) {
	t.Helper()
	if err := syscall.Kill(c.pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, fmt.Sprintf("the pid file to name pid %d's successor", c.pid), func() bool {
		pid, err := handoff.ReadPIDFile(c.pidfile)
		return err == nil && pid != c.pid
	})
	return c.follow(t), time.Now()
}

// follow takes the pid file's new process as the one serving, returning
// the old one.
func (c *upgradeChain) follow(t *testing.T) int {
	t.Helper()
	old := c.pid
	pid, err := handoff.ReadPIDFile(c.pidfile)
	if err != nil || pid == old {
		t.Fatalf("after the upgrade the pid file names %d (%v), want a new process", pid, err)
	}
	c.pid = pid
	c.pids = append(c.pids, pid)
	return old
}

// waitOldGone fails unless pid (an upgrade's old process) has exited
// within oldProcessExit of served (when its successor served), and
// returns when it was seen gone.
func waitOldGone(t *testing.T, pid int, served time.Time) time.Time {
	t.Helper()
	if !testnet.WaitUntil(time.Until(served.Add(oldProcessExit)), func() bool { return processGone(pid) }) {
		t.Fatalf("old process %d still runs %v after its successor served; want it gone within %v, its connections handed over",
			pid, time.Since(served).Round(time.Millisecond), oldProcessExit)
	}
	return time.Now()
}

// loggedCounts returns the relays= and sessions= fields of every log line
// (text format) with message msg, in order.
func loggedCounts(log, msg string) [][2]int {
	var out [][2]int
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(msg)+`"? relays=(\d+) (?:queued=\d+ )?sessions=(\d+)`).FindAllStringSubmatch(log, -1) {
		relays, _ := strconv.Atoi(m[1])
		sessions, _ := strconv.Atoi(m[2])
		out = append(out, [2]int{relays, sessions})
	}
	return out
}

// checkHandedOver fails unless the log says each of upgrades upgrades
// handed relays TCP relays and sessions UDP sessions over, and the new
// process adopted them.
func checkHandedOver(t *testing.T, log string, upgrades, relays, sessions int) {
	t.Helper()
	want := [2]int{relays, sessions}
	for _, msg := range []string{logHandedOver, logAdopted} {
		got := loggedCounts(log, msg)
		if len(got) != upgrades {
			t.Errorf("%d log lines %q, want one per upgrade (%d): %v", len(got), msg, upgrades, got)
			continue
		}
		for i, n := range got {
			if n != want {
				t.Errorf("upgrade %d: %q with relays=%d sessions=%d, want relays=%d sessions=%d", i+1, msg, n[0], n[1], relays, sessions)
			}
		}
	}
}

// handoverConfig writes a one-listener configuration (e2eutil.WriteConfig)
// with shutdown_timeout = "2s", so an l4lb that drains instead of handing
// over resets what it holds 2 s after an upgrade. pool is the rest of
// [pool.p] (its keys, then its backends, backendTOML); its health checks
// are off: every connection to a backend is a client's.
func handoverConfig(t *testing.T, pool string) (path, listen, adminAddr string) {
	t.Helper()
	path, listen, adminAddr = e2eutil.WriteConfig(t, "", nil, "[global]\nshutdown_timeout = \"2s\"")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text = fmt.Appendf(text, "%s\n[pool.p.health]\nenabled = false\n", pool)
	installBytes(t, text, path, 0o644)
	return path, listen, adminAddr
}

// backendTOML is a [[pool.p.backend]] at addr, with keys (lines) of its
// own.
func backendTOML(addr string, keys ...string) string {
	return fmt.Sprintf("[[pool.p.backend]]\naddr = %q\n%s", addr, strings.Join(keys, "\n"))
}

// needNofile makes sure this process may open n fds, raising its soft
// RLIMIT_NOFILE (l4lb, its child, inherits the limit).
func needNofile(t *testing.T, n uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur >= n {
		return
	}
	if rl.Max < n {
		t.Fatalf("RLIMIT_NOFILE hard limit %d, the test needs %d fds", rl.Max, n)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
}

// rawBackend is a TCP backend the test drives by hand: each connection
// l4lb makes to it goes to the test, in order of arrival, and is closed
// when the test ends. Its configurations turn health checks off, so every
// connection is a client's.
type rawBackend struct {
	Addr   string
	ln     net.Listener
	conns  chan *net.TCPConn
	mu     sync.Mutex
	open   []*net.TCPConn
	closed chan struct{}
}

func startRawBackend(t *testing.T) *rawBackend {
	t.Helper()
	testnet.CheckLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{Addr: ln.Addr().String(), ln: ln, conns: make(chan *net.TCPConn, 16), closed: make(chan struct{})}
	go func() {
		defer close(b.closed)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.open = append(b.open, c.(*net.TCPConn))
			b.mu.Unlock()
			select {
			case b.conns <- c.(*net.TCPConn):
			default:
				c.Close() // more than the test expects
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-b.closed
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.open {
			c.Close()
		}
	})
	return b
}

// next is the next connection l4lb made to the backend.
func (b *rawBackend) next(t *testing.T) *net.TCPConn {
	t.Helper()
	select {
	case c := <-b.conns:
		c.SetDeadline(time.Now().Add(flowLifetime))
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for l4lb to connect to the backend")
		return nil
	}
}

// dialTCP connects to addr (l4lb's listener), the connection closed when
// the test ends and bounded in time.
func dialTCP(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(flowLifetime))
	return c.(*net.TCPConn)
}

// flowLifetime bounds every connection of these tests: a test with ten
// upgrades takes over a minute on a loaded 2-core machine, and a deadline
// it outlives would look like a connection l4lb let stall.
const flowLifetime = 3 * time.Minute

// isReset reports whether err is a connection reset (or a write into one).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// patterned is n bytes of a pattern that no shift of itself matches
// (each 8-byte word its own offset), so a byte lost, doubled or moved
// shows where.
func patterned(n int) []byte {
	const hex = "0123456789abcdef"
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		w := i / 8
		for d := 6; d >= 0; d-- {
			b[i+d] = hex[w&15]
			w >>= 4
		}
		b[i+7] = '\n'
	}
	return b
}

// firstDiff is the first offset where got and want differ, or -1.
func firstDiff(got, want []byte) int {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return i
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	return -1
}

// failures collects what went wrong with a load, counted by kind
// ("reset", "lost", ...), the first few in full.
type failures struct {
	mu    sync.Mutex
	kinds map[string]int
	first []string
}

func (f *failures) add(kind, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kinds == nil {
		f.kinds = map[string]int{}
	}
	f.kinds[kind]++
	if len(f.first) < 20 {
		f.first = append(f.first, fmt.Sprintf(format, args...))
	}
}

// count is how many failures of kind there were.
func (f *failures) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kinds[kind]
}

// summary is "" when nothing failed, else the counts and the first ones.
func (f *failures) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.kinds) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(f.kinds))
	for k, n := range f.kinds {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ", ") + "; first:\n" + strings.Join(f.first, "\n")
}

// failureKind names how a connection failed.
func failureKind(err error) string {
	var ne net.Error
	switch {
	case isReset(err):
		return "reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "lost"
	}
	return "error"
}

// seqFleet is long-lived connections through l4lb to an echo backend
// (testnet.StartBackend: its tag line, then every byte back). Each sends
// the next sequence number (8 bytes) every interval, WebSocket-like, and
// checks that every echo comes back once, in order; at the end each
// half-closes and wants every echo, then a clean EOF.
type seqFleet struct {
	conns []*seqConn
	stop  chan struct{}
	halt  func()
	fails failures
}

type seqConn struct {
	id       int
	c        *net.TCPConn
	sent     atomic.Int64
	echoed   atomic.Int64
	lastEcho atomic.Int64  // UnixNano of the latest echo
	maxGap   atomic.Int64  // the longest time between two echoes, ns
	wrote    chan struct{} // closed when the writer has half-closed
	ended    chan struct{} // closed when the reader has ended
	failOnce
}

// failOnce counts a connection's first failure only: a reset fails its
// reads and its writes.
type failOnce struct {
	failed   atomic.Bool
	failedAt atomic.Int64 // UnixNano of the failure
}

func (o *failOnce) fail(f *failures, kind, format string, args ...any) {
	if o.failed.CompareAndSwap(false, true) {
		o.failedAt.Store(time.Now().UnixNano())
		f.add(kind, format, args...)
	}
}

// startSeqFleet opens n connections to addr, each greeted by tag, and
// starts their messages; the connections close when the test ends.
func startSeqFleet(t *testing.T, addr, tag string, n int, interval time.Duration) *seqFleet {
	t.Helper()
	f := &seqFleet{conns: make([]*seqConn, n), stop: make(chan struct{})}
	// The test ends every connection, whatever happened.
	var closeOnce sync.Once
	f.halt = func() { closeOnce.Do(func() { close(f.stop) }) }
	t.Cleanup(func() {
		f.halt()
		for _, s := range f.conns {
			if s != nil {
				s.c.Close()
				<-s.wrote
				<-s.ended
			}
		}
	})
	ids := make(chan int)
	errs := make(chan error, n)
	var dialers sync.WaitGroup
	for range 16 {
		dialers.Go(func() {
			for i := range ids {
				s, err := dialSeq(addr, tag, i)
				if err != nil {
					errs <- err
					continue
				}
				f.conns[i] = s
			}
		})
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	dialers.Wait()
	close(errs)
	for _, s := range f.conns {
		if s != nil {
			go s.write(f.stop, interval, &f.fails)
			go s.read(&f.fails)
		}
	}
	if err := <-errs; err != nil {
		t.Fatalf("opening %d long-lived connections: %v", n, err)
	}
	return f
}

func dialSeq(addr, tag string, id int) (*seqConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("conn %d: %w", id, err)
	}
	c.SetDeadline(time.Now().Add(flowLifetime))
	greeting := make([]byte, len(tag)+1)
	if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != tag+"\n" {
		c.Close()
		return nil, fmt.Errorf("conn %d: greeting %q, %v; want backend %s's", id, greeting, err, tag)
	}
	return &seqConn{id: id, c: c.(*net.TCPConn), wrote: make(chan struct{}), ended: make(chan struct{})}, nil
}

// write sends the next sequence number every interval (the fleet's
// connections spread over it) until stop, then half-closes.
func (s *seqConn) write(stop <-chan struct{}, interval time.Duration, f *failures) {
	defer close(s.wrote)
	select {
	case <-stop:
		s.c.CloseWrite()
		return
	case <-time.After(time.Duration(rand.Int64N(int64(interval)))):
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	buf := make([]byte, 8)
	for {
		binary.BigEndian.PutUint64(buf, uint64(s.sent.Load()))
		if _, err := s.c.Write(buf); err != nil {
			s.fail(f, failureKind(err), "conn %d: writing message %d: %v", s.id, s.sent.Load(), err)
			return
		}
		s.sent.Add(1)
		select {
		case <-stop:
			if err := s.c.CloseWrite(); err != nil {
				s.fail(f, failureKind(err), "conn %d: half-close: %v", s.id, err)
			}
			return
		case <-tick.C:
		}
	}
}

// read checks each echo is the next number, and the end: every number
// sent echoed, then EOF.
func (s *seqConn) read(f *failures) {
	defer close(s.ended)
	buf := make([]byte, 8)
	var last time.Time
	for {
		_, err := io.ReadFull(s.c, buf)
		now := time.Now()
		if errors.Is(err, io.EOF) {
			<-s.wrote
			if got, sent := s.echoed.Load(), s.sent.Load(); got != sent {
				s.fail(f, "lost", "conn %d: EOF after %d echoes of %d messages", s.id, got, sent)
				return
			}
			return
		}
		if err != nil {
			s.fail(f, failureKind(err), "conn %d: after %d echoes (last %v ago): %v", s.id, s.echoed.Load(), now.Sub(last).Round(time.Millisecond), err)
			return
		}
		seq, want := int64(binary.BigEndian.Uint64(buf)), s.echoed.Load()
		switch {
		case seq < want:
			s.fail(f, "duplicated", "conn %d: echo %d again after %d", s.id, seq, want-1)
			return
		case seq > want:
			s.fail(f, "lost", "conn %d: echo %d, want %d", s.id, seq, want)
			return
		}
		if !last.IsZero() && now.Sub(last) > time.Duration(s.maxGap.Load()) {
			s.maxGap.Store(int64(now.Sub(last)))
		}
		last = now
		s.lastEcho.Store(now.UnixNano())
		s.echoed.Add(1)
	}
}

// waitEchoedSince waits until every connection has had an echo after
// since, failing at once when one failed.
func (f *seqFleet) waitEchoedSince(t *testing.T, since time.Time, what string) {
	t.Helper()
	waitHeardSince(t, "every long-lived connection to be echoed "+what, since, f.conns, &f.fails)
}

// finish half-closes every connection and waits for each to end: every
// echo, then EOF.
func (f *seqFleet) finish(t *testing.T) {
	t.Helper()
	f.halt()
	waitEnded(t, "long-lived connection", f.conns, &f.fails)
}

func (s *seqConn) heard() int64          { return s.lastEcho.Load() }
func (s *seqConn) done() <-chan struct{} { return s.ended }
func (s *seqConn) progress() string {
	return fmt.Sprintf("%d: %d of %d echoes", s.id, s.echoed.Load(), s.sent.Load())
}

// heardFlow is one connection of a test's load, to waitHeardSince: when
// it last received.
type heardFlow interface{ heard() int64 }

// endingFlow is one connection of a test's load, to waitEnded.
type endingFlow interface {
	done() <-chan struct{} // closed once it has ended
	progress() string      // which it is and how far it got
}

// waitHeardSince waits until every flow has received after since (after
// an upgrade, the old process gone: the new one relays them all), failing
// at once when one failed.
func waitHeardSince[F heardFlow](t *testing.T, what string, since time.Time, flows []F, fails ...*failures) {
	t.Helper()
	testnet.Eventually(t, what, func() bool {
		for _, f := range fails {
			if s := f.summary(); s != "" {
				t.Fatalf("waiting for %s: failed: %s", what, s)
			}
		}
		for _, f := range flows {
			if f.heard() <= since.UnixNano() {
				return false
			}
		}
		return true
	})
}

// waitEnded waits for every flow, told to end, to have ended, then fails
// if any failed.
func waitEnded[F endingFlow](t *testing.T, what string, flows []F, fails *failures) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for _, f := range flows {
		select {
		case <-f.done():
		case <-deadline:
			t.Fatalf("%s %s did not end once told to", what, f.progress())
		}
	}
	if s := fails.summary(); s != "" {
		t.Fatalf("%ss failed: %s", what, s)
	}
}

// messages is how many echoes the fleet received.
func (f *seqFleet) messages() int64 {
	var n int64
	for _, s := range f.conns {
		n += s.echoed.Load()
	}
	return n
}

// resetPauses starts the longest pauses' measure anew.
func (f *seqFleet) resetPauses() {
	for _, s := range f.conns {
		s.maxGap.Store(0)
	}
}

// longestPause is the longest time a connection of the fleet waited
// between two echoes, and which one.
func (f *seqFleet) longestPause() (time.Duration, int) {
	var most time.Duration
	id := -1
	for _, s := range f.conns {
		if g := time.Duration(s.maxGap.Load()); g > most {
			most, id = g, s.id
		}
	}
	return most, id
}
