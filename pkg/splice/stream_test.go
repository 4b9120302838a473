package splice

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A Stream on its own, between raw non-blocking TCP sockets on loopback,
// driven as the loop drives it. (The loop's tests cover streams inside
// connections: half-close, resets, idle timeouts, fairness.)

// tcpPair returns the two ends of a loopback TCP connection, non-blocking.
func tcpPair(t *testing.T) (a, b int) {
	t.Helper()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(ln)
	if err != nil {
		t.Fatal(err)
	}
	a, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(a, sa); err != nil {
		t.Fatal(err)
	}
	b, _, err = unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range []int{a, b} {
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// rig is one direction: the test writes into in, the stream moves from src
// to dst, the test reads from out.
type rig struct {
	in, src, dst, out  int
	readable, writable bool
	s                  Stream
	sc                 *Scratch
	pool               *PipePool
}

func newRig(t *testing.T, pool *PipePool) *rig {
	t.Helper()
	testnet.CheckLeaks(t)
	r := &rig{readable: true, writable: true, pool: pool}
	r.in, r.src = tcpPair(t)
	r.dst, r.out = tcpPair(t)
	r.sc = NewScratch(pool)
	t.Cleanup(func() {
		for _, fd := range []int{r.in, r.src, r.dst, r.out} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		r.s.Release(r.sc)
		if pool != nil {
			r.sc.Pipes.Publish()
			if s := pool.Stats(); s.Busy() != 0 {
				t.Errorf("%d pipes still held after Release", s.Busy())
			}
		}
		r.sc.Close()
		if pool != nil {
			if s := pool.Stats(); s.Open != 0 {
				t.Errorf("%d pipes open after the scratch closed", s.Open)
			}
		}
	})
	return r
}

func (r *rig) move(budget int) (Status, error) {
	return r.s.Move(r.src, r.dst, &r.readable, &r.writable, budget, r.sc)
}

// write writes all of b into in (the socket buffers must have room).
func (r *rig) write(t *testing.T, b []byte) {
	t.Helper()
	for len(b) > 0 {
		n, err := unix.Write(r.in, b)
		if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
}

// feed writes payload into in from a goroutine, as fast as the socket
// takes it, and reports how that ended.
func (r *rig) feed(payload []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		for sent := 0; sent < len(payload); {
			n, err := unix.Write(r.in, payload[sent:])
			if n > 0 {
				sent += n
			}
			if err != nil && err != unix.EAGAIN {
				done <- err
				return
			}
			if err == unix.EAGAIN {
				time.Sleep(time.Millisecond)
			}
		}
		done <- nil
	}()
	return done
}

// waitReadable waits until fd has n bytes to read.
func waitReadable(t *testing.T, fd, n int) {
	t.Helper()
	testnet.Eventually(t, "bytes to arrive", func() bool {
		q, _ := unix.IoctlGetInt(fd, unix.SIOCINQ)
		return q >= n
	})
}

// readAll reads exactly n bytes from fd.
func readAll(t *testing.T, fd, n int) []byte {
	t.Helper()
	out := make([]byte, 0, n)
	buf := make([]byte, 256<<10)
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n {
		m, err := unix.Read(fd, buf[:min(len(buf), n-len(out))])
		if err == unix.EAGAIN {
			if time.Now().After(deadline) {
				t.Fatalf("read %d of %d bytes", len(out), n)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil || m == 0 {
			t.Fatalf("read after %d bytes: %d, %v", len(out), m, err)
		}
		out = append(out, buf[:m]...)
	}
	return out
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func newPool() *PipePool {
	return NewPipePool(PipePoolConfig{Size: 1 << 20, MaxOpen: 16, MaxIdle: 4})
}

// A small message is copied and the stream holds nothing after it; a
// stream's chunks are spliced through a pipe, given back once drained.
func TestStreamCopiesSmallSplicesStreams(t *testing.T) {
	pool := newPool()
	r := newRig(t, pool)
	r.write(t, []byte("ping"))
	waitReadable(t, r.src, 4)
	if st, err := r.move(1 << 30); st != Idle || err != nil {
		t.Fatalf("Move: %v, %v; want Idle", st, err)
	}
	if got := readAll(t, r.out, 4); string(got) != "ping" {
		t.Fatalf("got %q", got)
	}
	if r.sc.Copied != 4 || r.sc.Spliced != 0 || r.s.Delivered != 4 {
		t.Fatalf("copied %d spliced %d delivered %d; want 4 bytes copied", r.sc.Copied, r.sc.Spliced, r.s.Delivered)
	}
	if s := pool.Stats(); s.Open != 0 {
		t.Fatalf("a small message took %d pipes", s.Open)
	}

	// A stream: the first large read is copied, then the stream splices.
	payload := randomBytes(t, 2<<20)
	got := make(chan []byte, 1)
	go func() { got <- readAllQuiet(r.out, len(payload)) }()
	for sent := 0; sent < len(payload); {
		n, err := unix.Write(r.in, payload[sent:])
		if n > 0 {
			sent += n
		}
		if err != nil && err != unix.EAGAIN {
			t.Fatal(err)
		}
		r.readable, r.writable = true, true
		if st, err := r.move(1 << 30); st > Budget || err != nil {
			t.Fatalf("Move: %v, %v", st, err)
		}
	}
	for r.s.Delivered < int64(4+len(payload)) {
		r.readable, r.writable = true, true
		if st, err := r.move(1 << 30); st > Budget || err != nil {
			t.Fatalf("Move: %v, %v", st, err)
		}
		time.Sleep(time.Millisecond)
	}
	if b := <-got; !bytes.Equal(b, payload) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(b), len(payload))
	}
	if r.sc.Spliced < int64(len(payload))/2 {
		t.Fatalf("spliced %d of %d bytes, want most", r.sc.Spliced, len(payload))
	}
	r.sc.Pipes.Publish()
	if s := pool.Stats(); s.Busy() != 0 {
		t.Fatalf("an idle stream holds %d pipes", s.Busy())
	}
}

func readAllQuiet(fd, n int) []byte {
	out := make([]byte, 0, n)
	buf := make([]byte, 256<<10)
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		m, err := unix.Read(fd, buf[:min(len(buf), n-len(out))])
		if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil || m == 0 {
			break
		}
		out = append(out, buf[:m]...)
	}
	return out
}

// Bytes the destination will not take are held (the stream reads nothing
// more meanwhile) and delivered once it is writable again; a budget stops
// Move with nothing held.
func TestStreamHoldsWhatTheDestinationWillNotTake(t *testing.T) {
	for _, pool := range []*PipePool{newPool(), nil} {
		name := "spliced"
		if pool == nil {
			name = "copied"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, pool)
			// Small buffers, so a few MiB fill them.
			unix.SetsockoptInt(r.dst, unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<10)
			unix.SetsockoptInt(r.out, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
			payload := randomBytes(t, 4<<20)
			writer := r.feed(payload)
			// The budget: Move stops after about a budget, nothing held.
			waitReadable(t, r.src, 64<<10)
			if st, err := r.move(1); st != Budget || err != nil || r.s.Pending() {
				t.Fatalf("Move with a tiny budget: %v, %v, pending %v; want Budget with nothing held", st, err, r.s.Pending())
			}
			// Nobody reads out: Move fills the destination and holds the rest.
			var st Status
			testnet.Eventually(t, "the destination to fill", func() bool {
				r.readable = true
				var err error
				st, err = r.move(1 << 30)
				if err != nil {
					t.Fatal(err)
				}
				return st == Blocked
			})
			if !r.s.Pending() || r.writable {
				t.Fatalf("Blocked with pending %v, writable %v; want bytes held and the destination marked not writable", r.s.Pending(), r.writable)
			}
			delivered := r.s.Delivered
			r.readable = true
			if st, _ := r.move(1 << 30); st != Blocked || r.s.Delivered != delivered {
				t.Fatalf("Move while not writable: %v, delivered %d more; want Blocked and nothing moved", st, r.s.Delivered-delivered)
			}
			// The reader drains; the held bytes go first, then the rest.
			got := make(chan []byte, 1)
			go func() { got <- readAllQuiet(r.out, len(payload)) }()
			for r.s.Delivered < int64(len(payload)) {
				r.readable, r.writable = true, true
				if st, err := r.move(1 << 30); st > Budget || err != nil {
					t.Fatalf("Move: %v, %v", st, err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			if err := <-writer; err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, payload) {
				t.Fatalf("received %d bytes that differ from the %d sent", len(b), len(payload))
			}
		})
	}
}

// EOF ends a stream once everything is delivered; a reset source is a
// ReadFailed, a reset destination a WriteFailed. None keeps a pipe.
func TestStreamEnds(t *testing.T) {
	t.Run("EOF after the last byte", func(t *testing.T) {
		pool := newPool()
		r := newRig(t, pool)
		payload := randomBytes(t, 256<<10)
		r.write(t, payload)
		unix.Shutdown(r.in, unix.SHUT_WR)
		got := make(chan []byte, 1)
		go func() { got <- readAllQuiet(r.out, len(payload)) }()
		testnet.Eventually(t, "the stream to end", func() bool {
			r.readable, r.writable = true, true
			st, err := r.move(1 << 30)
			if err != nil {
				t.Fatal(err)
			}
			return st == Ended
		})
		if b := <-got; !bytes.Equal(b, payload) {
			t.Fatalf("received %d bytes that differ from the %d sent", len(b), len(payload))
		}
		r.sc.Pipes.Publish()
		if s := pool.Stats(); s.Busy() != 0 {
			t.Fatalf("an ended stream holds %d pipes", s.Busy())
		}
	})
	t.Run("reset source", func(t *testing.T) {
		r := newRig(t, newPool())
		closeWithReset(&r.in)
		var st Status
		var err error
		testnet.Eventually(t, "the reset to arrive", func() bool {
			r.readable = true
			st, err = r.move(1 << 30)
			return st != Idle
		})
		if st != ReadFailed || !errors.Is(err, unix.ECONNRESET) {
			t.Fatalf("Move: %v, %v; want ReadFailed, ECONNRESET", st, err)
		}
	})
	t.Run("reset destination", func(t *testing.T) {
		r := newRig(t, newPool())
		closeWithReset(&r.out)
		var st Status
		var err error
		testnet.Eventually(t, "the reset to be seen", func() bool {
			r.write(t, []byte("x"))
			r.readable, r.writable = true, true
			st, err = r.move(1 << 30)
			return st != Idle
		})
		if st != WriteFailed || err == nil {
			t.Fatalf("Move: %v, %v; want WriteFailed", st, err)
		}
	})
}

// closeWithReset closes *fd with a reset (SO_LINGER 0) and marks it
// closed.
func closeWithReset(fd *int) {
	unix.SetsockoptLinger(*fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(*fd)
	*fd = -1
}

// A stream cut while its pipe holds bytes closes that pipe: it is never
// handed to another stream with someone else's bytes in it.
func TestReleaseDiscardsAPipeHoldingBytes(t *testing.T) {
	pool := newPool()
	r := newRig(t, pool)
	unix.SetsockoptInt(r.dst, unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<10)
	unix.SetsockoptInt(r.out, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
	pipesBefore := countPipeFDs(t)
	payload := randomBytes(t, 8<<20)
	in := r.in
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for sent := 0; sent < len(payload); {
			n, err := unix.Write(in, payload[sent:])
			if n > 0 {
				sent += n
			}
			if err == unix.EAGAIN {
				time.Sleep(time.Millisecond)
			} else if err != nil {
				return
			}
		}
	}()
	testnet.Eventually(t, "a pipe to hold bytes", func() bool {
		r.readable = true
		r.move(1 << 30)
		return r.s.inPipe > 0
	})
	if s := pool.Stats(); s.Open != 1 || s.Busy() != 1 {
		t.Fatalf("pool %+v, want the one pipe busy", s)
	}
	r.s.Release(r.sc)
	if s := pool.Stats(); s.Open != 0 {
		t.Fatalf("pool %+v after releasing a pipe with bytes in it, want it closed", s)
	}
	if n := countPipeFDs(t); n != pipesBefore {
		t.Fatalf("%d pipe fds, %d before: the pipe was not closed", n, pipesBefore)
	}
	unix.Shutdown(r.in, unix.SHUT_RDWR) // ends the writer
	<-writer
}

func countPipeFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "pipe:") {
			n++
		}
	}
	return n
}
