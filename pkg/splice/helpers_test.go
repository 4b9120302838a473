package splice

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// proxied is one connection through a Relayer: the test holds the client's
// end and the backend's end, the relay runs in between.
type proxied struct {
	client  *net.TCPConn // the test's client socket
	backend *net.TCPConn // the backend's accepted socket
	result  chan Result
}

// rig is a front listener relaying every accepted connection to a backend
// listener, both on 127.0.0.1.
type rig struct {
	t        *testing.T
	relayer  *Relayer
	front    *net.TCPListener
	back     *net.TCPListener
	accepted chan *net.TCPConn
	meter    Meter
	relays   sync.WaitGroup
	// tuneFront, if set, adjusts the relay's client-side socket.
	tuneFront func(*net.TCPConn)
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	front, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, relayer: NewRelayer(cfg), front: front, back: back, accepted: make(chan *net.TCPConn, 1024)}
	go func() {
		for {
			c, err := back.AcceptTCP()
			if err != nil {
				return
			}
			r.accepted <- c
		}
	}()
	t.Cleanup(func() {
		front.Close()
		back.Close()
		// Relays end once the test has closed its ends; wait so that the
		// leak check that runs after this sees their final state.
		done := make(chan struct{})
		go func() { r.relays.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("relays still running at the end of the test")
		}
	})
	return r
}

// open makes one proxied connection.
func (r *rig) open() *proxied {
	r.t.Helper()
	return r.openWith(nil)
}

// openWith makes one proxied connection and runs prep on it before the
// relay starts, so a test can have bytes waiting for the relay when its
// idle clock starts.
func (r *rig) openWith(prep func(*proxied)) *proxied {
	r.t.Helper()
	p := &proxied{result: make(chan Result, 1)}
	done := make(chan error, 1)
	start := make(chan struct{})
	defer close(start) // on every path, so the relay goroutine never waits forever
	r.relays.Add(1)
	go func() {
		defer r.relays.Done()
		fc, err := r.front.AcceptTCP()
		if err != nil {
			done <- err
			return
		}
		if r.tuneFront != nil {
			r.tuneFront(fc)
		}
		bc, err := net.DialTCP("tcp", nil, r.back.Addr().(*net.TCPAddr))
		if err != nil {
			fc.Close()
			done <- err
			return
		}
		done <- nil
		<-start
		p.result <- r.relayer.Relay(fc, bc, &r.meter)
	}()
	c, err := net.DialTCP("tcp", nil, r.front.Addr().(*net.TCPAddr))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := <-done; err != nil {
		r.t.Fatal(err)
	}
	p.client = c
	select {
	case p.backend = <-r.accepted:
	case <-time.After(10 * time.Second):
		r.t.Fatal("backend never accepted")
	}
	if prep != nil {
		prep(p)
	}
	return p
}

func (p *proxied) close() {
	p.client.Close()
	p.backend.Close()
}

// waitResult waits for the relay to end, failing the test after a generous
// deadline.
func (p *proxied) waitResult(t *testing.T) Result {
	t.Helper()
	select {
	case res := <-p.result:
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("relay did not end")
		return Result{}
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// checkLeaks checks, when the test ends, that every goroutine and fd the
// test started is gone (testnet.CheckLeaks). The pools' idle pipes are
// closed first: they are kept on purpose and are not a leak.
func checkLeaks(t *testing.T, pools ...*PipePool) {
	t.Helper()
	testnet.CheckLeaks(t)
	t.Cleanup(func() {
		for _, p := range pools {
			testnet.Eventually(t, "pipes returned to the pool", func() bool { return p.Stats().Busy() == 0 })
			p.Trim()
		}
	})
}

// stallWatch measures how late this process gets to run: a goroutine asks
// to wake every millisecond and records the longest it overslept. An idle
// timeout of a few hundred milliseconds can only be tested on real sockets
// while the process runs within a fraction of it; on a machine too busy
// for that, a relay cut for idleness may really have been idle.
type stallWatch struct {
	worstNs atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

func watchStalls(t *testing.T) *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case now := <-tick.C:
				now = time.Now() // when this goroutine ran, not when the tick was due
				if d := now.Sub(last); d > time.Duration(w.worstNs.Load()) {
					w.worstNs.Store(int64(d))
				}
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(w.stop); <-w.done })
	return w
}

func (w *stallWatch) reset()               { w.worstNs.Store(0) }
func (w *stallWatch) worst() time.Duration { return time.Duration(w.worstNs.Load()) }

// measureIdle runs attempt, a real-socket scenario with an idle timeout of
// idle, until one attempt either passes or fails on a machine that ran it
// promptly; at most 5 attempts. attempt fails the test itself (t.Fatal)
// for what no stall can cause (a relay ending before its timeout, a wrong
// outcome); it returns an error for what a stall can cause (a relay cut
// while the test was sending or reading), with gap, the longest pause in
// the traffic the test itself drove. Such a failure counts only if neither
// gap nor the process's longest stall reached half the idle timeout: then
// the traffic was there and the relay cut it anyway.
func measureIdle(t *testing.T, idle time.Duration, attempt func() (gap time.Duration, err error)) {
	t.Helper()
	w := watchStalls(t)
	for i := 1; ; i++ {
		w.reset()
		gap, err := attempt()
		if err == nil {
			return
		}
		stall := w.worst()
		if gap < idle/2 && stall < idle/2 {
			t.Fatalf("%v (traffic paused at most %v, process stalled at most %v)", err, gap, stall)
		}
		t.Logf("attempt %d inconclusive: %v; but the machine was too busy to tell (traffic paused %v, process stalled %v, idle timeout %v)", i, err, gap, stall, idle)
		if i == 5 {
			t.Skipf("machine too busy to measure a %v idle timeout in %d attempts", idle, i)
		}
	}
}
