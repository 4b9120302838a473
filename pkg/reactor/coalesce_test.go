package reactor

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// inSyscall waits until thread tid of this process is blocked in system
// call nr (/proc/self/task/TID/syscall), or fails after a generous
// deadline.
func inSyscall(t *testing.T, tid, nr int) {
	t.Helper()
	path := "/proc/self/task/" + strconv.Itoa(tid) + "/syscall"
	testnet.Eventually(t, "thread "+strconv.Itoa(tid)+" in system call "+strconv.Itoa(nr), func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		f := strings.Fields(string(b))
		return len(f) > 0 && f[0] == strconv.Itoa(nr)
	})
}

// gatherOnThread runs p.gather on a goroutine locked to its thread and
// returns that thread's id and a channel with gather's result.
func gatherOnThread(p *poller, deadline time.Time) (tid int, got <-chan int) {
	tids, out := make(chan int), make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		out <- p.gather(time.Now(), deadline)
	}()
	return <-tids, out
}

func TestGatherTakesWhatIsThereWithoutSleeping(t *testing.T) {
	p := pollerAfterEvent(t, 0)
	p.coalesce = time.Hour // a window would outlast the test's timeout
	p.wake()
	if n := p.gather(time.Now(), time.Time{}); n != 1 {
		t.Fatalf("gather found %d events with one pending, want 1", n)
	}
	if p.gathers != 0 {
		t.Fatalf("gather slept %d times with an event already there", p.gathers)
	}
}

func TestGatherCollectsWhatArrivesWhileItSleeps(t *testing.T) {
	p := pollerAfterEvent(t, 0)
	p.coalesce, p.sleeps = 300*time.Millisecond, 0
	tid, got := gatherOnThread(p, time.Time{})
	inSyscall(t, tid, unix.SYS_NANOSLEEP)
	p.wake() // arrives during the window: it must not need a blocking wait
	if n := <-got; n != 1 {
		t.Fatalf("gather found %d events, want the 1 that arrived during its window", n)
	}
	if p.gathers != 1 || p.sleeps != 0 {
		t.Fatalf("gathers %d, blocking sleeps %d; want 1 and 0", p.gathers, p.sleeps)
	}
}

func TestGatherWithNothingReturnsNone(t *testing.T) {
	p := pollerAfterEvent(t, 0)
	p.coalesce = 2 * time.Millisecond
	if n := p.gather(time.Now(), time.Time{}); n != 0 {
		t.Fatalf("gather found %d events with none sent", n)
	}
	if p.gathers != 1 {
		t.Fatalf("gather slept %d times, want 1", p.gathers)
	}
}

func TestGatherSleepsOutItsWindowUpToTheDeadline(t *testing.T) {
	// The runtime interrupts raw sleeps every 10-20 ms (sysmon); the
	// window still lasts until the deadline, the loop's next timer, and
	// not past it.
	p := pollerAfterEvent(t, 0)
	p.coalesce = time.Hour
	start := time.Now()
	deadline := start.Add(60 * time.Millisecond)
	_, got := gatherOnThread(p, deadline)
	select {
	case n := <-got:
		if n != 0 {
			t.Fatalf("gather found %d events with none sent", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a gather with a window of an hour and a deadline 60 ms away did not return within 30 s")
	}
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("gather returned %v after it began, before its deadline (60 ms): interrupted sleeps must go on", now.Sub(start))
	}
}

// A held wait coalesces only once armed, once per arming, and falls back
// to a blocking wait when its window brought nothing.
func TestWaitCoalescesOnlyWhenArmed(t *testing.T) {
	p := holdingPoller(t, 0)
	p.coalesce = 2 * time.Millisecond

	// Not armed: a blocking wait, no window.
	got := waitAsync(p)
	p.wake()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	p.drainWake()
	if p.gathers != 0 || p.sleeps != 1 {
		t.Fatalf("unarmed wait: gathers %d, blocking sleeps %d; want 0 and 1", p.gathers, p.sleeps)
	}

	// Armed, nothing comes during the window: the wait goes on blocking
	// and still returns the next event.
	p.mayCoalesce, p.sleeps = true, 0
	tids, done := make(chan int), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		_, err := p.wait(-1, time.Now())
		done <- err
	}()
	inSyscall(t, <-tids, unix.SYS_EPOLL_PWAIT) // past the window, in the blocking wait
	p.wake()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.drainWake()
	if p.gathers != 1 || p.sleeps == 0 || p.mayCoalesce {
		t.Fatalf("armed wait with an empty window: gathers %d, blocking sleeps %d, still armed %v; want 1, some, false",
			p.gathers, p.sleeps, p.mayCoalesce)
	}
}

func TestBusyPollingLoopsDoNotCoalesce(t *testing.T) {
	p := holdingPoller(t, time.Minute)
	p.coalesce, p.mayCoalesce = time.Hour, true
	got := waitAsync(p)
	time.Sleep(20 * time.Millisecond)
	p.wake()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if p.gathers != 0 {
		t.Fatalf("a busy-polling wait also coalesced (%d windows)", p.gathers)
	}
}
