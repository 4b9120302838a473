package clock

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Real's timers follow the runtime's clock; under synctest that clock is
// the bubble's, so this checks the wiring without waiting.
func TestRealTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Or(nil)
		start := c.Now()
		fired := make(chan time.Time, 1)
		c.AfterFunc(3*time.Second, func() { fired <- c.Now() })
		tm, ch := c.NewTimer(time.Second)
		<-ch
		if got := c.Now().Sub(start); got != time.Second {
			t.Fatalf("NewTimer fired after %v, want 1s", got)
		}
		if tm.Reset(time.Hour) {
			t.Fatal("Reset of a fired timer reported it active")
		}
		if !tm.Stop() {
			t.Fatal("Stop of a reset timer reported it inactive")
		}
		if got := (<-fired).Sub(start); got != 3*time.Second {
			t.Fatalf("AfterFunc fired after %v, want 3s", got)
		}
	})
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// received reports what ch holds now, without waiting.
func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresAtItsDeadline(t *testing.T) {
	c := NewFake(epoch)
	_, ch := c.NewTimer(time.Second)
	c.Advance(time.Second - time.Nanosecond)
	if _, ok := received(ch); ok {
		t.Fatal("fired before its deadline")
	}
	c.Advance(time.Hour)
	v, ok := received(ch)
	if !ok || !v.Equal(epoch.Add(time.Second)) {
		t.Fatalf("received %v, %v; want the deadline %v", v, ok, epoch.Add(time.Second))
	}
	if got := c.Now(); !got.Equal(epoch.Add(time.Hour + time.Second - time.Nanosecond)) {
		t.Fatalf("Now %v after the two moves", got)
	}
	c.Advance(time.Hour)
	if _, ok := received(ch); ok {
		t.Fatal("a one-shot timer fired twice")
	}
}

// Due timers fire in deadline order, those of one instant in the order
// they were armed, each seeing Now at its deadline; a callback's own timer
// due within the move fires in it too. Advance returns after them all.
func TestFakeAdvanceFiresInOrder(t *testing.T) {
	c := NewFake(epoch)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+c.Now().Sub(epoch).String()) }
	}
	c.AfterFunc(3*time.Second, at("c"))
	c.AfterFunc(time.Second, func() {
		at("a")()
		c.AfterFunc(time.Second, at("b2")) // due at 2s, armed after b1
	})
	c.AfterFunc(2*time.Second, at("b1"))
	c.AfterFunc(5*time.Second, at("late"))
	c.Advance(4 * time.Second)
	want := []string{"a@1s", "b1@2s", "b2@2s", "c@3s"}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	if !c.Now().Equal(epoch.Add(4 * time.Second)) {
		t.Fatalf("Now %v after the move, want 4s on", c.Now())
	}
	c.Advance(time.Second)
	if n := len(got); n != len(want)+1 || got[n-1] != "late@5s" {
		t.Fatalf("fired %v after the late timer's deadline", got)
	}
}

func TestFakeSetMovesOnAndNeverBack(t *testing.T) {
	c := NewFake(epoch)
	fired := false
	c.AfterFunc(time.Minute, func() { fired = true })
	c.Set(epoch.Add(time.Minute))
	if !fired {
		t.Fatal("Set to the deadline did not fire the timer")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Set moved the clock back")
		}
	}()
	c.Set(epoch)
}

// A move that another overtook while a callback ran does not set the
// time back to its own end: here the callback's own move overtakes it.
func TestFakeNeverGoesBack(t *testing.T) {
	c := NewFake(epoch)
	c.AfterFunc(time.Second, func() { c.Advance(time.Hour) })
	c.Advance(2 * time.Second)
	if got, want := c.Now(), epoch.Add(time.Hour+time.Second); !got.Equal(want) {
		t.Fatalf("Now %v after an overtaken move, want %v", got, want)
	}
}

// Stop and Reset follow time.Timer (Go 1.23): true while the timer is
// still to fire, or fired with its value not yet received; no stale value
// is received after either.
func TestFakeStopAndReset(t *testing.T) {
	c := NewFake(epoch)
	tm, ch := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported it inactive")
	}
	c.Advance(time.Hour)
	if _, ok := received(ch); ok {
		t.Fatal("a stopped timer fired")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported the timer active")
	}

	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	c.Advance(time.Second) // fired, value not received
	if !tm.Reset(time.Second) {
		t.Fatal("Reset of a timer whose value was not received reported it inactive")
	}
	if _, ok := received(ch); ok {
		t.Fatal("a stale value was received after Reset")
	}
	c.Advance(time.Second)
	if _, ok := received(ch); !ok {
		t.Fatal("the reset timer did not fire")
	}
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a fired and received timer reported it active")
	}
	if !tm.Reset(2 * time.Minute) {
		t.Fatal("Reset of an armed timer reported it inactive")
	}
	c.Advance(time.Minute)
	if _, ok := received(ch); ok {
		t.Fatal("the timer fired at the deadline Reset replaced")
	}
	c.Advance(time.Minute)
	if _, ok := received(ch); !ok {
		t.Fatal("the timer did not fire at its new deadline")
	}

	calls := 0
	f := c.AfterFunc(time.Second, func() { calls++ })
	if !f.Stop() {
		t.Fatal("Stop of an armed AfterFunc reported it inactive")
	}
	c.Advance(time.Hour)
	if f.Reset(time.Second) || calls != 0 {
		t.Fatalf("stopped AfterFunc: calls %d, Reset reported it active", calls)
	}
	c.Advance(time.Second)
	if calls != 1 || f.Stop() {
		t.Fatalf("calls %d after the reset deadline, or Stop of a fired AfterFunc reported it active", calls)
	}
}

// A timer armed for now or earlier fires at once, without a move.
func TestFakeDueNowFiresAtOnce(t *testing.T) {
	c := NewFake(epoch)
	_, ch := c.NewTimer(0)
	if v, ok := received(ch); !ok || !v.Equal(epoch) {
		t.Fatalf("NewTimer(0): %v %v, want the time at once", v, ok)
	}
	done := make(chan struct{})
	c.AfterFunc(-time.Second, func() { close(done) })
	<-done
}

// Under -race: timers armed, reset and stopped from many goroutines while
// two others move the clock, each timer firing once per arming, and the
// time never going back.
func TestFakeConcurrentUse(t *testing.T) {
	c := NewFake(epoch)
	var wg, receivers sync.WaitGroup
	var fired atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				tm := c.AfterFunc(time.Duration(i+j+1)*time.Millisecond, func() { fired.Add(1) })
				if j%2 == 0 {
					tm.Reset(time.Millisecond)
				} else {
					tm.Stop()
				}
				_, ch := c.NewTimer(time.Millisecond)
				receivers.Go(func() { <-ch })
			}
		})
	}
	var movers sync.WaitGroup
	for range 2 {
		movers.Go(func() {
			last := c.Now()
			for range 500 {
				c.Advance(time.Millisecond)
				if now := c.Now(); now.Before(last) {
					t.Errorf("the clock went back from %v to %v", last, now)
				} else {
					last = now
				}
			}
		})
	}
	wg.Wait()
	movers.Wait()
	c.Advance(time.Hour) // whatever is left
	receivers.Wait()     // every channel timer fired
	// An odd j's timer fires only if the clock passed it before Stop.
	if n := fired.Load(); n < 400 || n > 800 {
		t.Fatalf("%d callbacks, want the 400 reset ones and at most the 400 stopped late", n)
	}
}
