package testnet

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// leakDeadline is how long a leak check waits for goroutines and fds to
// wind down before it reports them: generous, because sockets close on the
// kernel's clock and goroutines exit when the scheduler gets to them, and a
// loaded machine is slow at both. The helper's own tests shorten it.
var leakDeadline = 20 * time.Second

// CheckLeaks snapshots the process's goroutines and open fds now and, when
// the test ends, waits (up to a generous deadline) until every goroutine
// started since has exited and every fd opened since is closed, failing the
// test with the stacks of the goroutines and the targets of the fds that
// remain (sockets with their addresses and TCP state).
//
// Call it before the test starts anything: its check runs after every
// cleanup registered later (t.Cleanup runs last-in, first-out), so what
// the test and its helpers set up afterwards is torn down before the check.
// Calling it again in the same test does nothing, so setup helpers can call
// it and a test that uses several of them is checked once (StartBackend
// and FrozenBackend do). A check a helper begins after the test started
// something runs before that thing's cleanup: what it starts after the
// snapshot must end without that cleanup (a backend's connections do,
// once their peers close them).
//
// What is compared: goroutines by id (ids are never reused, so a goroutine
// that existed at the snapshot is never blamed, nor one from an earlier
// test), leaving out those of the test framework (stacks in package
// testing), of os/signal and those the runtime starts for itself; fds as
// (number, readlink target) pairs from /proc/self/fd, after the runtime's
// netpoller has been set up so its fds are part of the snapshot.
//
// Parallel tests. Goroutines and fds belong to the process, not to a test:
// while two tests run at once neither's can be told apart. Go runs a test
// that is not parallel alone (top-level parallel tests wait until every
// sequential one has finished; parallel subtests run only beside their
// parallel siblings), so its check is exact. A test that is parallel, or
// runs under a parallel ancestor, or whose check window overlaps another
// test's (say, both called CheckLeaks and then t.Parallel), is therefore
// not checked at all: it logs that it was skipped rather than blame one
// test for another's goroutines. Such tests are still covered by a check
// in a sequential parent (their windows nest inside it), or by a check of
// the whole package (TakeSnapshot before the tests, Check after them).
//
// Not seen: a socket whose last reference was dropped during the test and
// which a collection closed by its finalizer before the check (the GC is
// off while the check waits, so one dropped later is seen).
func CheckLeaks(t testing.TB) {
	t.Helper()
	w := openWindow(t)
	if w == nil {
		return // already checked
	}
	s := snapshot(t)
	t.Cleanup(func() {
		overlapped := closeWindow(w)
		switch {
		case overlapped != "":
			t.Logf("leak check skipped: ran at the same time as %s; goroutines and fds are process-wide", overlapped)
		case isParallel(t):
			t.Logf("leak check skipped: parallel test; goroutines and fds are process-wide")
		default:
			s.Check(t)
		}
	})
}

// Snapshot is the process's goroutines and open fds at one moment.
type Snapshot struct {
	goroutines map[uint64]bool
	fds        map[string]bool // "fd -> target"
}

// TakeSnapshot records the process's goroutines and fds, for a check of a
// whole package: take it before the tests run (a package-level variable is
// initialised before TestMain) and call Check after them.
func TakeSnapshot() *Snapshot { return snapshot(nil) }

func snapshot(t testing.TB) *Snapshot {
	warmNetpoll()
	fds, err := openFDs()
	if err != nil {
		if t != nil {
			t.Fatalf("leak check: %v", err)
		}
		panic(err)
	}
	s := &Snapshot{goroutines: map[uint64]bool{}, fds: map[string]bool{}}
	for _, g := range goroutines() {
		s.goroutines[g.id] = true
	}
	for _, f := range fds {
		s.fds[f.key()] = true
	}
	return s
}

// Check waits until every goroutine started and every fd opened since the
// snapshot is gone, and fails t with what is left after a generous
// deadline.
//
// The garbage collector is off while it waits: an fd whose last reference
// was dropped is closed by a finalizer at the next collection, which would
// hide the leak (a process must not rely on that to close its sockets).
// A collection during the test itself can still hide one that way.
func (s *Snapshot) Check(t testing.TB) {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	deadline := time.Now().Add(leakDeadline)
	for {
		gs, fds, err := s.leaks()
		if err != nil {
			t.Errorf("leak check: %v", err)
			return
		}
		if len(gs) == 0 && len(fds) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("leaked past the %v leak-check deadline:%s", leakDeadline, describe(gs, fds))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaks lists what exists now and did not at the snapshot.
func (s *Snapshot) leaks() ([]goroutine, []fdInfo, error) {
	var gs []goroutine
	for _, g := range goroutines() {
		if !s.goroutines[g.id] && !g.ignored() {
			gs = append(gs, g)
		}
	}
	all, err := openFDs()
	if err != nil {
		return nil, nil, err
	}
	var fds []fdInfo
	for _, f := range all {
		if !s.fds[f.key()] && !frameworkFD(f) {
			fds = append(fds, f)
		}
	}
	return gs, fds, nil
}

var netpollOnce sync.Once

// warmNetpoll makes the runtime create its netpoller (an epoll fd and a
// wake-up eventfd, kept for the life of the process) before a snapshot, so
// the first network use in a test is not mistaken for a leak.
func warmNetpoll() {
	netpollOnce.Do(func() {
		if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
			ln.Close()
		}
	})
}

// goroutine is one entry of a full goroutine dump.
type goroutine struct {
	id    uint64
	stack string // the whole entry, header included
}

// goroutines returns every goroutine but the caller's.
func goroutines() []goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for i, entry := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the caller's own goroutine comes first
		}
		var id uint64
		if _, err := fmt.Sscanf(entry, "goroutine %d", &id); err != nil {
			continue
		}
		out = append(out, goroutine{id: id, stack: strings.TrimSpace(entry)})
	}
	return out
}

// ignored: goroutines of the test framework, of os/signal's process-wide
// loop (started on the first signal.Notify, never stopped) and those the
// runtime starts for itself.
func (g goroutine) ignored() bool {
	for _, line := range strings.Split(g.stack, "\n") {
		switch {
		case strings.HasPrefix(line, "testing."),
			strings.HasPrefix(line, "os/signal."),
			strings.HasPrefix(line, "created by runtime."),
			strings.HasPrefix(line, "created by os/signal."):
			return true
		}
	}
	return false
}

var (
	frameArgs   = regexp.MustCompile(`(?m)\([^()]*\)$`)
	pcOffset    = regexp.MustCompile(` \+0x[0-9a-f]+`)
	inGoroutine = regexp.MustCompile(` in goroutine \d+`)
	header      = regexp.MustCompile(`^goroutine \d+ [^\[]*\[([^,\]]*)[^\]]*\]:`)
)

// signature is a stack without what differs between goroutines started at
// the same place: ids, arguments, waiting times.
func (g goroutine) signature() string {
	s := header.ReplaceAllString(g.stack, "goroutine [$1]:")
	s = frameArgs.ReplaceAllString(s, "(...)")
	s = pcOffset.ReplaceAllString(s, "")
	return inGoroutine.ReplaceAllString(s, "")
}

// fdInfo is one open fd and what it refers to.
type fdInfo struct {
	fd     int
	target string
}

func (f fdInfo) key() string { return strconv.Itoa(f.fd) + " -> " + f.target }

// frameworkFD: the log go test asks the test binary to keep of the files
// and environment it touched (-test.testlogfile, for the build cache). The
// testing package opens it after package initialisation, so a snapshot
// taken then does not know it; it is not the tests'. And the lock files
// of the ports FreePort holds (a parent test's, seen from a subtest, or
// a test's own until its cleanups end): held on purpose.
func frameworkFD(f fdInfo) bool {
	return strings.HasSuffix(f.target, "/testlog.txt") || reservedFD(f.fd)
}

// openFDs lists /proc/self/fd, leaving out the fd used to read it.
func openFDs() ([]fdInfo, error) {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	self := int(dir.Fd())
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []fdInfo
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd == self {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil {
			continue // closed since the directory was read
		}
		out = append(out, fdInfo{fd: fd, target: target})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].fd < out[j].fd })
	return out, nil
}

// describe renders leaked goroutines (grouped by stack) and fds.
func describe(gs []goroutine, fds []fdInfo) string {
	var b strings.Builder
	if len(gs) > 0 {
		groups := map[string][]uint64{}
		var order []string
		for _, g := range gs {
			sig := g.signature()
			if _, ok := groups[sig]; !ok {
				order = append(order, sig)
			}
			groups[sig] = append(groups[sig], g.id)
		}
		fmt.Fprintf(&b, "\n%d goroutine(s):", len(gs))
		for i, sig := range order {
			if i == 20 {
				fmt.Fprintf(&b, "\n(%d more kinds of stack)", len(order)-i)
				break
			}
			fmt.Fprintf(&b, "\n-- %d like this (ids %v):\n%s\n", len(groups[sig]), groups[sig], sig)
		}
	}
	if len(fds) > 0 {
		socks := socketTable()
		fmt.Fprintf(&b, "\n%d fd(s):", len(fds))
		for _, f := range fds {
			fmt.Fprintf(&b, "\n  fd %d -> %s", f.fd, f.target)
			if s, ok := socks[f.target]; ok {
				fmt.Fprintf(&b, " (%s)", s)
			}
		}
	}
	return b.String()
}

var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN-SENT", "03": "SYN-RECV", "04": "FIN-WAIT1",
	"05": "FIN-WAIT2", "06": "TIME-WAIT", "07": "CLOSE", "08": "CLOSE-WAIT",
	"09": "LAST-ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// socketTable maps "socket:[inode]" to a description of the socket (its
// protocol, addresses and TCP state) for the process's network namespace.
func socketTable() map[string]string {
	out := map[string]string{}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		data, err := os.ReadFile("/proc/self/net/" + proto)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Scan() // header
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 10 {
				continue
			}
			desc := fmt.Sprintf("%s %s -> %s", proto, procAddr(f[1]), procAddr(f[2]))
			if strings.HasPrefix(proto, "tcp") {
				desc += " " + tcpStates[f[3]]
			}
			out["socket:["+f[9]+"]"] = desc
		}
	}
	return out
}

// procAddr decodes /proc/net/tcp's "0100007F:1F90" (host byte order words).
func procAddr(s string) string {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return s
	}
	raw := make(net.IP, 0, 16)
	for i := 0; i+8 <= len(host); i += 8 {
		w, err := strconv.ParseUint(host[i:i+8], 16, 32)
		if err != nil {
			return s
		}
		raw = append(raw, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	return net.JoinHostPort(raw.String(), strconv.Itoa(int(p)))
}

// Check windows: which tests are between CheckLeaks and their check, to
// tell when two overlapped.
type window struct {
	t          testing.TB
	name       string
	overlapped string // a test that ran at the same time, if any
}

var (
	windowsMu sync.Mutex
	windows   = map[*window]bool{}
)

// openWindow records that t's check window is open; nil when t already
// has one.
func openWindow(t testing.TB) *window {
	windowsMu.Lock()
	defer windowsMu.Unlock()
	w := &window{t: t, name: t.Name()}
	for o := range windows {
		if o.t == t {
			return nil
		}
		if !nested(o.name, w.name) {
			o.overlapped, w.overlapped = w.name, o.name
		}
	}
	windows[w] = true
	return w
}

// closeWindow ends w's window and says which test overlapped it, if any.
func closeWindow(w *window) string {
	windowsMu.Lock()
	defer windowsMu.Unlock()
	delete(windows, w)
	return w.overlapped
}

// nested: one test is the other or a subtest of it, so they do not run at
// the same time (a parent waits in t.Run while its subtest runs).
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// isParallel reports whether t, or a test it is a subtest of, called
// t.Parallel. The testing package does not say; its unexported fields do
// (read, never written, through reflect). If a Go release renames them,
// this reports false and the overlap of check windows is the only guard
// left; TestIsParallel notices.
func isParallel(t testing.TB) bool {
	v := reflect.ValueOf(t)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	c := v.Elem().FieldByName("common")
	for c.IsValid() && c.Kind() == reflect.Struct {
		p := c.FieldByName("isParallel")
		if !p.IsValid() || p.Kind() != reflect.Bool {
			return false
		}
		if p.Bool() {
			return true
		}
		parent := c.FieldByName("parent")
		if !parent.IsValid() || parent.Kind() != reflect.Pointer || parent.IsNil() {
			return false
		}
		c = parent.Elem()
	}
	return false
}
