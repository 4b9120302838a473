package relay

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// failFirst makes the loop's sockets of front fail their next accepts
// with errs, one each, then accept as usual. Call it on the loop.
func failFirst(l *Loop, front string, errs ...error) {
	for _, s := range l.lsocks {
		if s.f.Name != front {
			continue
		}
		left := errs
		s.accept = func(fd int) (int, netip.AddrPort, error) {
			if len(left) > 0 {
				err := left[0]
				left = left[1:]
				return -1, netip.AddrPort{}, err
			}
			return rawsys.Accept4(fd)
		}
	}
}

// accept(2) passes on network errors already pending on the new
// connection (its man page: ENETDOWN, EPROTO, ENOPROTOOPT, EHOSTDOWN,
// ENONET, EHOSTUNREACH, EOPNOTSUPP, ENETUNREACH; and ECONNABORTED, EPERM
// for a client gone or refused by a firewall): that client is lost, the
// next one may be fine, so the loop accepts on at once, in the same turn,
// with no back-off, warning or accept error counted.
func TestAcceptRetriesAtOnceAfterAPendingNetworkError(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENETDOWN, unix.EPROTO, unix.ENOPROTOOPT, unix.EHOSTDOWN,
		unix.ENONET, unix.EHOSTUNREACH, unix.EOPNOTSUPP, unix.ENETUNREACH, unix.ECONNABORTED, unix.EPERM} {
		t.Run(unix.ErrnoName(errno), func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			l := h.loops[0]
			h.on(l, func() { failFirst(l, "p", errno) })
			// The loop is held while the client queues, then the task
			// that held it accepts, as the listener's event would: the
			// error comes first, the client right after.
			queued, done := make(chan struct{}), make(chan struct{})
			var backingOff bool
			var n int64
			l.r.Post(func() {
				<-queued
				for _, s := range l.lsocks {
					s.acceptAll()
					backingOff = backingOff || s.retry.Armed()
				}
				n = l.nconns.Load()
				close(done)
			})
			c := h.dial("p")
			defer c.Close()
			testnet.Eventually(t, "the client to wait in the accept queue", func() bool { return acceptQueued(l) == 1 })
			close(queued)
			<-done
			if n == 1 {
				b := k.Next(t)
				defer b.Close()
			}
			if backingOff || n != 1 {
				t.Fatalf("after %v: backing off %v, %d connections held; want the queued client accepted in the same turn, no back-off", errno, backingOff, n)
			}
			if got := h.front("p").AcceptErrors.Load(); got != 0 {
				t.Errorf("%d accept errors counted for a client's own network error", got)
			}
			if n := h.logs.count("accept failing, backing off"); n != 0 {
				t.Errorf("warned %d times of a back-off", n)
			}
		})
	}
}

// acceptQueued is the length of the accept queue of l's listening
// sockets (TCP_INFO's unacked, for a listener).
func acceptQueued(l *Loop) int {
	n := 0
	for _, s := range l.lsocks {
		if info, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n += int(info.Unacked)
		}
	}
	return n
}

func TestAcceptFailureClassification(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want acceptVerdict
	}{
		{unix.EAGAIN, queueEmpty},
		{unix.EWOULDBLOCK, queueEmpty},
		{unix.ECONNABORTED, clientLost},
		{unix.EPERM, clientLost},
		{unix.ENETDOWN, clientLost},
		{unix.EPROTO, clientLost},
		{unix.ENOPROTOOPT, clientLost},
		{unix.EHOSTDOWN, clientLost},
		{unix.ENONET, clientLost},
		{unix.EHOSTUNREACH, clientLost},
		{unix.EOPNOTSUPP, clientLost},
		{unix.ENETUNREACH, clientLost},
		{unix.EMFILE, outOfResources},
		{unix.ENFILE, outOfResources},
		{unix.ENOBUFS, outOfResources},
		{unix.ENOMEM, outOfResources},
		{unix.EINVAL, outOfResources}, // unknown: back off rather than spin
	} {
		if got := acceptFailure(tc.err); got != tc.want {
			t.Errorf("acceptFailure(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// Out of fds, a listener backs off, doubling from 5 ms to at most 1 s,
// with one warning for the episode and every failure counted; events that
// come meanwhile do not accept (the retry timer does); once accepting
// works again the queued client is served and the next episode starts
// from 5 ms. Counted in loop turns, driven by hand: no clock involved.
func TestAcceptBacksOffDoublingOnResourceErrors(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	errs := make([]error, len(want))
	for i := range errs {
		errs[i] = unix.EMFILE
	}
	var backoffs []time.Duration
	var calls int
	var armed, reset, idleArmed bool
	var n int64
	queued, done := make(chan struct{}), make(chan struct{})
	l.r.Post(func() {
		<-queued
		failFirst(l, "p", errs...)
		s := l.lsocks[0]
		inner := s.accept
		s.accept = func(fd int) (int, netip.AddrPort, error) { calls++; return inner(fd) }
		s.Event(unix.EPOLLIN) // the listener's edge
		for range want {
			backoffs = append(backoffs, s.backoff/time.Millisecond)
			before := calls
			s.Event(unix.EPOLLIN) // an edge while backing off: no accept
			idleArmed = idleArmed || calls != before
			// What fireDue does when the retry is due.
			armed = s.retry.Armed()
			l.r.Arm(&s.retry, 0) // due at once
			l.r.FireDue(0)
		}
		n = l.nconns.Load()
		reset = s.backoff == 0 && s.failures == 0 && !s.retry.Armed()
		close(done)
	})
	c := h.dial("p")
	defer c.Close()
	testnet.Eventually(t, "the client to wait in the accept queue", func() bool { return acceptQueued(l) == 1 })
	close(queued)
	<-done
	if n == 1 {
		b := k.Next(t)
		defer b.Close()
	}
	if !slices.Equal(backoffs, want) {
		t.Errorf("back-offs %v ms, want %v ms", backoffs, want)
	}
	if idleArmed {
		t.Error("an event accepted while the listener was backing off")
	}
	if !armed || !reset {
		t.Errorf("retry armed while failing: %v; back-off reset once accepting worked: %v; want both", armed, reset)
	}
	if n != 1 {
		t.Fatalf("%d connections after fds came back, want the queued client", n)
	}
	if got := h.front("p").AcceptErrors.Load(); got != int64(len(want)) {
		t.Errorf("%d accept errors counted, want %d", got, len(want))
	}
	if w, i := h.logs.count("accept failing, backing off"), h.logs.count("accepting again", "failed_accepts", "10"); w != 1 || i != 1 {
		t.Errorf("%d back-off warnings and %d recovery notes, want 1 each", w, i)
	}
}
