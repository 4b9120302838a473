package reactor

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

// withProcs runs the test with GOMAXPROCS n.
func withProcs(t *testing.T, n int) {
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// waitAsync runs p.wait(-1, ...) on a goroutine and hands back what it saw.
func waitAsync(p *poller) <-chan error {
	got := make(chan error, 1)
	go func() {
		evs, err := p.wait(-1, time.Now())
		if err == nil && (len(evs) != 1 || int(evs[0].Fd) != p.wakefd) {
			err = unix.EBADMSG
		}
		got <- err
	}()
	return got
}

func TestPollerHoldsAPOnlyWhileBusy(t *testing.T) {
	withProcs(t, 2)
	base := holders.Load()
	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if p.holding {
		t.Fatal("a new poller holds a P before any event")
	}

	p.wake()
	if err := <-waitAsync(p); err != nil {
		t.Fatal(err)
	}
	p.drainWake()
	if !p.holding && holders.Load() == int32(runtime.GOMAXPROCS(0)-1) {
		t.Skip("no spare P token (another loop of this process holds it)")
	}
	if !p.holding || holders.Load() != base+1 {
		t.Fatalf("after an event: holding %v, holders %d (base %d); want the P held", p.holding, holders.Load(), base)
	}

	// Nothing more comes: past holdIdle the wait gives the P back and
	// goes on waiting the runtime's way.
	got := waitAsync(p)
	if !testnet.WaitUntil(10*time.Second, func() bool { return holders.Load() == base }) {
		t.Fatalf("an idle wait still holds a P after 10s (holders %d, base %d)", holders.Load(), base)
	}
	p.wake()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	p.drainWake()
	if !p.holding {
		t.Fatal("the event after an idle spell did not take the P again")
	}
	p.close()
	if holders.Load() != base {
		t.Fatalf("close left the P token taken (holders %d, base %d)", holders.Load(), base)
	}
	p.epfd, p.wakefd = -1, -1 // closed; the deferred close is a no-op
}

func TestPollerNeverHoldsTheLastP(t *testing.T) {
	withProcs(t, 1)
	if p := pollerAfterEvent(t, 0); p.holding {
		t.Fatal("with GOMAXPROCS 1 the loop took the only P")
	}
}

// The garbage collector stops a goroutine by signalling its thread, which
// ends a raw epoll_wait with EINTR: the wait must yield and go on, not
// fail, and must still see the event that comes after.
func TestHeldWaitYieldsToTheGarbageCollector(t *testing.T) {
	p := holdingPoller(t, 0)
	got := waitAsync(p)
	for range 20 {
		runtime.GC()
	}
	select {
	case err := <-got:
		t.Fatalf("the held wait returned before any event: %v", err)
	default:
	}
	p.wake()
	if err := <-got; err != nil {
		t.Fatalf("the held wait failed after collections: %v", err)
	}
}

// pollerAfterEvent is a new poller that has seen one event (a wake-up),
// so it took a P token if one was spare.
func pollerAfterEvent(t *testing.T, busyPoll time.Duration) *poller {
	t.Helper()
	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	p.busyPoll = busyPoll
	p.wake()
	if err := <-waitAsync(p); err != nil {
		t.Fatal(err)
	}
	p.drainWake()
	return p
}

// holdingPoller is a poller that has seen an event and so holds a P;
// the test is skipped when no P token is spare.
func holdingPoller(t *testing.T, busyPoll time.Duration) *poller {
	t.Helper()
	withProcs(t, 2)
	p := pollerAfterEvent(t, busyPoll)
	if !p.holding {
		t.Skip("no spare P token (another loop of this process holds it)")
	}
	p.sleeps = 0
	return p
}

func TestBusyPollTakesTheNextEventWithoutSleeping(t *testing.T) {
	p := holdingPoller(t, time.Minute) // far longer than the test
	got := waitAsync(p)
	time.Sleep(20 * time.Millisecond) // the wait is spinning by now, or about to
	p.wake()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if p.sleeps != 0 {
		t.Fatalf("a busy-polling wait slept %d times before its event", p.sleeps)
	}
}

func TestWithoutBusyPollAWaitSleeps(t *testing.T) {
	p := holdingPoller(t, 0)
	got := waitAsync(p)
	p.wake()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if p.sleeps != 1 {
		t.Fatalf("the wait slept %d times, want 1: busy_poll off must not spin", p.sleeps)
	}
}

// GOMAXPROCS can go down while loops hold Ps (the runtime follows a
// container's CPU limit): a busy loop, whose waits never idle long enough
// to let go on their own, must still give its P back.
func TestBusyLoopLetsGoWhenGOMAXPROCSDrops(t *testing.T) {
	p := holdingPoller(t, 0)
	base := holders.Load() - 1
	stop := make(chan struct{})
	loopDone := make(chan error, 1)
	go func() { // the loop: an event every 100 µs keeps it busy
		for {
			select {
			case <-stop:
				loopDone <- nil
				return
			default:
			}
			p.wake()
			if _, err := p.wait(-1, time.Now()); err != nil {
				loopDone <- err
				return
			}
			p.drainWake()
			time.Sleep(100 * time.Microsecond)
		}
	}()
	defer func() {
		close(stop)
		if err := <-loopDone; err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if holders.Load() != base+1 {
		t.Fatalf("the busy loop holds no P before the drop (holders %d, base %d)", holders.Load(), base)
	}
	runtime.GOMAXPROCS(1)
	if !testnet.WaitUntil(10*time.Second, func() bool { return holders.Load() == base }) {
		t.Fatalf("still %d holders (base %d) 10s after GOMAXPROCS went to 1", holders.Load(), base)
	}
}

// gcStorm runs garbage collections back to back until the test ends:
// each one interrupts a held raw wait a few times.
func gcStorm(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// Interruptions must not postpone a held wait's timeout: a wait that
// restarted in full after each one ran seconds late for a 20 ms timer.
func TestHeldWaitKeepsItsTimeoutUnderCollections(t *testing.T) {
	p := holdingPoller(t, 0)
	gcStorm(t)
	var worst time.Duration
	for range 20 {
		if !p.holding { // each wait starts held, as a busy loop's does
			if p.holding = acquireHold(); !p.holding {
				t.Skip("no spare P token (another loop of this process holds it)")
			}
		}
		p.idleSince = time.Time{}
		start := time.Now()
		evs, err := p.wait(20, time.Now())
		if err != nil || len(evs) != 0 {
			t.Fatalf("wait(20) with nothing to report: %d events, %v", len(evs), err)
		}
		worst = max(worst, time.Since(start))
	}
	p.release()
	t.Logf("worst wait(20): %v", worst)
	if worst > time.Second {
		t.Fatalf("wait(20) returned after %v under back-to-back collections", worst)
	}
}

// Nor may they keep an idle loop holding its P.
func TestIdleLoopLetsGoUnderCollections(t *testing.T) {
	p := holdingPoller(t, 0)
	base := holders.Load() - 1
	gcStorm(t)
	got := waitAsync(p)
	if !testnet.WaitUntil(10*time.Second, func() bool { return holders.Load() == base }) {
		t.Fatalf("an idle loop still holds its P after 10s of collections (holders %d, base %d)", holders.Load(), base)
	}
	p.wake()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// A holding loop passes through the scheduler every yieldEvery of its
// clock, and a loop that waits the runtime's way never needs to (its
// waits are scheduling points already); a due yield that finds
// GOMAXPROCS lowered gives the P token back. On the loop's clock, moved by
// hand.
func TestHoldingLoopYieldsBeforeItsSliceEnds(t *testing.T) {
	withProcs(t, 2)
	clk := clock.NewFake(time.Now())
	l, err := New(Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.poll.close()
	if l.poll.holding = acquireHold(); !l.poll.holding {
		t.Skip("no spare P token (another loop of this process holds it)")
	}
	yields := 0
	prev := yield
	yield = func() { yields++ }
	t.Cleanup(func() { yield = prev })
	turn := func(d time.Duration) {
		clk.Advance(d)
		l.now = l.Clock()
		l.yieldIfDue()
	}

	l.yieldedAt = l.Clock()
	for range 39 { // 3.9 ms of turns
		turn(100 * time.Microsecond)
	}
	if yields != 0 {
		t.Fatalf("%d yields within yieldEvery of the last, want none", yields)
	}
	turn(100 * time.Microsecond)
	if yields != 1 {
		t.Fatalf("%d yields at yieldEvery, want one", yields)
	}
	turn(time.Duration(yieldEvery) - 1)
	if yields != 1 {
		t.Fatalf("%d yields just short of the next yieldEvery, want still one", yields)
	}
	turn(20 * time.Millisecond) // one long turn: one yield, not one per slice missed
	if yields != 2 || !l.poll.holding {
		t.Fatalf("after a long turn: %d yields, holding %v; want two, and the P still held", yields, l.poll.holding)
	}

	runtime.GOMAXPROCS(1) // no token is spare any more
	turn(time.Duration(yieldEvery))
	if yields != 3 || l.poll.holding {
		t.Fatalf("a due yield after GOMAXPROCS went to 1: %d yields, holding %v; want three, and the token given back", yields, l.poll.holding)
	}
	turn(time.Second)
	if yields != 3 {
		t.Fatalf("a loop that does not hold a P yielded (%d), want no yield", yields)
	}
}

// A busy loop that is running Go code when GOMAXPROCS goes down (so the
// world stop interrupts no wait of its) still gives its P token back
// within a few of its yields. Its events come from a timerfd, every 4 ms,
// so it never idles holdIdle; the 256-wait check alone would take about a
// second. Review finding: the loop kept the only P for 0.5-1.25 s.
func TestBusyLoopRunningCodeLetsGoSoonAfterGOMAXPROCSDrops(t *testing.T) {
	withProcs(t, 2)
	base := holders.Load()
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	defer func() { l.Stop(); l.Wait() }()
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	every := unix.NsecToTimespec(int64(4 * time.Millisecond))
	if err := unix.TimerfdSettime(tfd, 0, &unix.ItimerSpec{Interval: every, Value: every}, nil); err != nil {
		t.Fatal(err)
	}
	l.Do(func() {
		if err := l.Register(tfd, timerfdOwner(tfd), unix.EPOLLIN|unix.EPOLLET); err != nil {
			t.Error(err)
		}
	})
	defer l.Do(func() { l.Forget(tfd); unix.Close(tfd) })
	if !testnet.WaitUntil(10*time.Second, func() bool { return holders.Load() == base+1 }) {
		t.Skipf("the loop never held a P (holders %d, base %d): another loop holds the spare token", holders.Load(), base)
	}
	running := make(chan struct{})
	l.Post(func() { // Go code, not a wait, while the world stops
		close(running)
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		}
	})
	<-running
	dropped := time.Now()
	runtime.GOMAXPROCS(1)
	if !testnet.WaitUntil(10*time.Second, func() bool { return holders.Load() == base }) {
		t.Fatal("the busy loop never gave its token back after GOMAXPROCS went to 1")
	}
	if took := time.Since(dropped); took > 500*time.Millisecond {
		t.Fatalf("the busy loop held its P %v after GOMAXPROCS went to 1, want a few of its 4 ms yields", took)
	}
}

// timerfdOwner reads its timerfd's expirations.
type timerfdOwner int

func (fd timerfdOwner) Event(uint32) {
	var b [8]byte
	unix.Read(int(fd), b[:])
}
