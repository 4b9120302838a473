package testnet

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records what a leak check reports instead of failing the real
// test, so a leak can be made on purpose and its report inspected.
type fakeTB struct {
	testing.TB // not set: calling a method not defined below panics
	name       string

	mu       sync.Mutex
	cleanups []func()
	errs     []string
	logs     []string
}

func newFake(t *testing.T) *fakeTB { return &fakeTB{name: t.Name() + "/fake"} }

func (f *fakeTB) Name() string { return f.name }
func (f *fakeTB) Helper()      {}
func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) { f.Errorf(format, args...) }
func (f *fakeTB) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// end runs the fake test's cleanups, last registered first, as the testing
// package does, and returns what was reported.
func (f *fakeTB) end() (errs, logs string) {
	for {
		f.mu.Lock()
		if len(f.cleanups) == 0 {
			errs, logs = strings.Join(f.errs, "\n"), strings.Join(f.logs, "\n")
			f.mu.Unlock()
			return errs, logs
		}
		fn := f.cleanups[len(f.cleanups)-1]
		f.cleanups = f.cleanups[:len(f.cleanups)-1]
		f.mu.Unlock()
		fn()
	}
}

// shortDeadline makes leak checks give up quickly: the leaks below are real
// and would otherwise be waited for as long as a slow teardown.
func shortDeadline(t *testing.T) {
	old := leakDeadline
	leakDeadline = 300 * time.Millisecond
	t.Cleanup(func() { leakDeadline = old })
}

func TestCheckLeaksReportsAGoroutine(t *testing.T) {
	CheckLeaks(t) // the real test must not leak either
	shortDeadline(t)
	f := newFake(t)
	CheckLeaks(f)
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-release // still parked when the fake test ends
	}()
	errs, _ := f.end()
	close(release)
	<-done
	if !strings.Contains(errs, "1 goroutine(s)") || !strings.Contains(errs, "TestCheckLeaksReportsAGoroutine") {
		t.Fatalf("a goroutine still running at the end was not reported with its stack; report:\n%s", errs)
	}
}

func TestCheckLeaksReportsFDs(t *testing.T) {
	CheckLeaks(t)
	shortDeadline(t)
	f := newFake(t)
	CheckLeaks(f)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errs, _ := f.end()
	r.Close()
	w.Close()
	ln.Close()
	for _, want := range []string{"3 fd(s)", "pipe:[", "tcp " + ln.Addr().String() + " -> 0.0.0.0:0 LISTEN"} {
		if !strings.Contains(errs, want) {
			t.Errorf("report lacks %q; report:\n%s", want, errs)
		}
	}
}

// A leak reported through a fake TB from inside a subtest: the subtest is
// what the test framework and a setup helper would both see.
func TestCheckLeaksInSubtest(t *testing.T) {
	shortDeadline(t)
	var errs string
	var leaked net.Conn
	t.Run("leaks a connection", func(t *testing.T) {
		f := newFake(t)
		CheckLeaks(f)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			ln.Close()
			t.Fatal(err)
		}
		s, err := ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		leaked = c // the client end is left open
		errs, _ = f.end()
	})
	leaked.Close()
	if !strings.Contains(errs, "1 fd(s)") || !strings.Contains(errs, "socket:[") || !strings.Contains(errs, "-> "+leaked.RemoteAddr().String()) {
		t.Fatalf("the client socket left open was not reported with its addresses; report:\n%s", errs)
	}
}

func TestCheckLeaksWaitsForTeardown(t *testing.T) {
	CheckLeaks(t)
	f := newFake(t)
	CheckLeaks(f)
	// Things that wind down on their own shortly after the test: not leaks.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, func() { ln.Close() })
	go func() { time.Sleep(200 * time.Millisecond) }()
	if errs, _ := f.end(); errs != "" {
		t.Fatalf("teardown finishing after the test was reported as a leak:\n%s", errs)
	}
}

func TestCheckLeaksIgnoresWhatExistedBefore(t *testing.T) {
	CheckLeaks(t)
	shortDeadline(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()

	f := newFake(t)
	CheckLeaks(f)
	CheckLeaks(f) // a second call (another setup helper) adds nothing
	if errs, _ := f.end(); errs != "" {
		t.Fatalf("what existed before the check began was reported:\n%s", errs)
	}
}

func TestCheckLeaksSkipsOverlappingTests(t *testing.T) {
	shortDeadline(t)
	a, b := newFake(t), newFake(t)
	a.name, b.name = t.Name()+"/a", t.Name()+"/b"
	CheckLeaks(a)
	CheckLeaks(b) // a sibling running at the same time: neither is checked
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, f := range []*fakeTB{b, a} {
		errs, logs := f.end()
		if errs != "" || !strings.Contains(logs, "leak check skipped") {
			t.Errorf("%s: overlapping check reported %q, logged %q; want it skipped", f.name, errs, logs)
		}
	}

	// A subtest's window nests inside its parent's: both are checked.
	parent, child := newFake(t), newFake(t)
	child.name = parent.name + "/child"
	CheckLeaks(parent)
	CheckLeaks(child)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, f := range []*fakeTB{child, parent} {
		if errs, _ := f.end(); !strings.Contains(errs, "fd(s)") {
			t.Errorf("%s: nested check did not report the open connection: %q", f.name, errs)
		}
	}
}

func TestIsParallel(t *testing.T) {
	if isParallel(t) {
		t.Error("a sequential test reported as parallel")
	}
	t.Run("group", func(t *testing.T) {
		t.Run("sequential", func(t *testing.T) {
			if isParallel(t) {
				t.Error("a sequential subtest reported as parallel")
			}
		})
		t.Run("parallel", func(t *testing.T) {
			t.Parallel()
			if !isParallel(t) {
				t.Error("t.Parallel() not detected: the testing package's fields changed, update isParallel")
			}
			t.Run("under a parallel parent", func(t *testing.T) {
				if !isParallel(t) {
					t.Error("a subtest of a parallel test not detected")
				}
			})
		})
	})
	if isParallel(newFake(t)) {
		t.Error("a fake TB reported as parallel")
	}
}

func TestSnapshotCheck(t *testing.T) {
	shortDeadline(t)
	s := TakeSnapshot()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	s.Check(f)
	ln.Close()
	errs, _ := f.end()
	if !strings.Contains(errs, "LISTEN") {
		t.Fatalf("a package-wide check missed a listener: %q", errs)
	}
	f = newFake(t)
	s.Check(f)
	if errs, _ := f.end(); errs != "" {
		t.Fatalf("clean package-wide check reported %q", errs)
	}
}

func TestLeakReportGroupsLikeGoroutines(t *testing.T) {
	CheckLeaks(t)
	shortDeadline(t)
	f := newFake(t)
	CheckLeaks(f)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Go(func() {
			var m sync.Mutex
			m.Lock()
			<-release
			m.Unlock()
		})
	}
	errs, _ := f.end()
	close(release)
	wg.Wait()
	if !strings.Contains(errs, "3 goroutine(s)") || !strings.Contains(errs, "-- 3 like this") {
		t.Fatalf("three goroutines parked at one place are not reported as one group of 3:\n%s", errs)
	}
}
