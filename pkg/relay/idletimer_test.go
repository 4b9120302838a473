package relay

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// The idle timer's logic on the loop's own clock, exact to the
// nanosecond however busy the machine: a loop that never runs, whose
// timer heap the test drives with chosen instants, and connections made
// by hand whose ends are socket pairs. (TestIdleTimeout and
// TestSlowReaderIsNotIdle cover the same on real sockets through a running
// loop, where only bounds can be measured.)
func TestIdleTimerOnLoopClock(t *testing.T) {
	testnet.CheckLeaks(t)
	const idle = int64(300 * time.Millisecond)
	p := buildPools(t, []frontSpec{{name: "p", backends: []string{"127.0.0.1:1"},
		keys: fmt.Sprintf("idle_timeout = %q", time.Duration(idle))}})["p"]
	sh := NewShared(100, nil, nil)
	r, err := reactor.New(reactor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l := New(r, sh)
	t.Cleanup(r.Discard)

	type peers struct{ client, backend int }
	// open makes a relaying connection whose last activity is at 0, with
	// its idle timer armed as connected() arms it.
	open := func() (*conn, peers) {
		var cl, be [2]int
		for _, sp := range []*[2]int{&cl, &be} {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			*sp = fds
			t.Cleanup(func() { unix.Close(fds[1]) })
		}
		c := &conn{l: l, f: NewFront("p", p), pool: p, phase: phaseRelaying}
		c.timer.FireTo(c)
		c.cl = endpoint{c: c, fd: cl[0], client: true}
		c.be = endpoint{c: c, fd: be[0]}
		d := p.BeginDial(p.At(0), false)
		p.Pending(d) // no count_early_reset: settled as a success at once
		c.backend = d.Backend
		l.held.add(c)
		l.nconns.Add(1)
		sh.Active.Add(1)
		c.lastActive = 0
		l.r.Arm(&c.timer, c.lastActive+idle)
		return c, peers{cl[1], be[1]}
	}
	alive := func(c *conn, at int64) {
		t.Helper()
		if c.phase != phaseRelaying {
			t.Fatalf("cut at %v, before its idle timeout", time.Duration(at))
		}
	}
	cut := func(c *conn, at int64) {
		t.Helper()
		if c.phase != phaseClosed {
			t.Fatalf("still up at %v, an idle timeout after its last activity", time.Duration(at))
		}
	}

	t.Run("silent connection", func(t *testing.T) {
		c, _ := open()
		l.r.FireDue(idle - 1)
		alive(c, idle-1)
		l.r.FireDue(idle)
		cut(c, idle)
	})

	t.Run("one-way traffic every idle/3 for 4 idle timeouts", func(t *testing.T) {
		c, _ := open()
		var last int64
		for now := int64(0); now <= 4*idle; now += idle / 3 {
			// The loop's pump stamps activity; the timer is not touched.
			c.lastActive, last = now, now
			l.r.FireDue(now)
			alive(c, now)
			if !c.timer.Armed() || c.timer.At() > c.lastActive+idle {
				t.Fatalf("at %v: timer armed %v for %v, want at most an idle timeout after the last activity",
					time.Duration(now), c.timer.Armed(), time.Duration(c.timer.At()))
			}
		}
		l.r.FireDue(last + idle - 1)
		alive(c, last+idle-1)
		l.r.FireDue(last + idle)
		cut(c, last+idle)
	})

	t.Run("a peer draining its send queue is not idle", func(t *testing.T) {
		c, pr := open()
		// Ten messages wait in the loop's client socket for a reader that
		// takes them slowly.
		for range 10 {
			if _, err := unix.Write(c.cl.fd, make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
		l.r.FireDue(idle) // the queue grew since the last look: draining
		alive(c, idle)
		if _, err := unix.Read(pr.client, make([]byte, 500)); err != nil {
			t.Fatal(err)
		}
		l.r.FireDue(2 * idle) // it shrank: still draining
		alive(c, 2*idle)
		l.r.FireDue(3*idle - 1)
		alive(c, 3*idle-1)
		l.r.FireDue(3 * idle) // unchanged for an idle timeout: the reader is gone
		cut(c, 3*idle)
	})

	if n := l.r.TimersArmed(); n != 0 {
		t.Fatalf("%d timers armed after every connection was cut", n)
	}
	if n := sh.Active.Load(); n != 0 {
		t.Fatalf("%d connections counted active after every one was cut", n)
	}
	if n := p.At(0).Active(); n != 0 {
		t.Fatalf("backend counts %d active connections, want 0", n)
	}
}
