package relay

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/rawsys"
	"github.com/l4lb/l4lb/pkg/splice"
)

// The relay's guarantees, on the loop's data path (they were tested on the
// goroutine relay of pkg/splice before the loop replaced it).

// Byte-exact both ways at once, over many connections on two loops, with
// the per-backend meters and the per-path counters accounting every byte.
func TestRelayByteExactManyConcurrent(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})

	const conns = 64
	const size = 1 << 20
	ps := make([]*proxied, conns)
	for i := range ps {
		ps[i] = h.open("p", k)
		defer ps[i].close()
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	var total int64
	for i, p := range ps {
		up, down := randomBytes(t, size+i), randomBytes(t, size-i)
		total += int64(len(up) + len(down))
		wg.Go(func() {
			if err := exchange(p, up, down); err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Both sides half-closed: the loops close each connection themselves.
	testnet.Eventually(t, "every connection to end", func() bool { return h.sh.Active.Load() == 0 })
	b := h.front("p").Pool().At(0)
	if got := b.Meter.ToBackend.Load() + b.Meter.ToClient.Load(); got != total {
		t.Errorf("backend meter counted %d bytes, want %d", got, total)
	}
	// Counters are flushed once per wake-up, after the close.
	testnet.Eventually(t, "the path counters to account every byte", func() bool {
		return h.sh.Spliced.Load()+h.sh.Copied.Load() == total
	})
	// Streams are spliced; only reads under the stream threshold (the
	// first bytes of a burst) are copied.
	if spliced := h.sh.Spliced.Load(); spliced < total*3/4 {
		t.Errorf("spliced %d of %d bytes, want most", spliced, total)
	}
	if n := h.logs.count("relay reset"); n != 0 {
		t.Errorf("%d relays ended with a reset, want every one completed", n)
	}
	if l0, l1 := h.front("p").OK.Load(), int64(conns); l0 != l1 {
		t.Errorf("front counted %d clients served, want %d", l0, l1)
	}
}

// Half-close is exact both ways: one side's FIN reaches the other after
// every byte it sent, and the opposite direction keeps flowing until its
// own FIN. Small requests (copied, short reads) and streams (spliced).
func TestRelayHalfClose(t *testing.T) {
	for _, size := range []int{5, 300 << 10} {
		for _, clientFirst := range []bool{true, false} {
			name := fmt.Sprintf("%d bytes, backend shuts first", size)
			if clientFirst {
				name = fmt.Sprintf("%d bytes, client shuts first", size)
			}
			t.Run(name, func(t *testing.T) {
				k := testnet.StartTaker(t)
				h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
				p := h.open("p", k)
				defer p.close()
				first, second := p.client, p.backend
				if !clientFirst {
					first, second = second, first
				}
				deadline := time.Now().Add(30 * time.Second)
				first.SetDeadline(deadline)
				second.SetDeadline(deadline)

				request := randomBytes(t, size)
				if _, err := first.Write(request); err != nil {
					t.Fatal(err)
				}
				first.CloseWrite()
				got, err := io.ReadAll(second) // ends only at the half-close
				if err != nil || !bytes.Equal(got, request) {
					t.Fatalf("peer read %d bytes (err %v), want the %d-byte request then EOF", len(got), err, len(request))
				}
				// The half-closed side keeps receiving.
				reply := randomBytes(t, 2<<20)
				writeErr := make(chan error, 1)
				go func() {
					_, err := second.Write(reply)
					second.CloseWrite()
					writeErr <- err
				}()
				got, err = io.ReadAll(first)
				if err != nil || !bytes.Equal(got, reply) {
					t.Fatalf("half-closed side read %d bytes (err %v), want %d then EOF", len(got), err, len(reply))
				}
				if err := <-writeErr; err != nil {
					t.Fatal(err)
				}
				testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
				if n := h.logs.count("relay reset"); n != 0 {
					t.Fatalf("the relay ended with a reset, want completed")
				}
			})
		}
	}
}

// A reset on one side reaches the other as a reset, also right behind a
// last few bytes (which arrive with the reset, in one edge).
func TestRelayPassesResetOn(t *testing.T) {
	for _, tc := range []struct {
		backendResets bool
		lastWords     string
	}{{true, ""}, {false, ""}, {true, "bye"}, {false, "bye"}} {
		name, outcome := "client reset reaches backend", splice.ClientReset
		if tc.backendResets {
			name, outcome = "backend reset reaches client", splice.BackendReset
		}
		if tc.lastWords != "" {
			name += " behind bytes"
		}
		backendResets := tc.backendResets
		t.Run(name, func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			p := h.open("p", k)
			defer p.close()
			// Prove the path works, then reset.
			p.ping(t)
			resetter, peer := p.client, p.backend
			if backendResets {
				resetter, peer = peer, resetter
			}
			if tc.lastWords != "" {
				resetter.Write([]byte(tc.lastWords))
			}
			resetter.SetLinger(0)
			resetter.Close()
			mustReset(t, "peer of the side that reset", peer)
			testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
			if n := h.logs.count("relay reset", "outcome", outcome.String()); n != 1 {
				t.Fatalf("%d relays logged as ended by %v, want 1", n, outcome)
			}
		})
	}
}

// An idle timeout cuts a silent connection, while one that carries one
// byte one way every idle/3 survives four idle timeouts, then is cut an
// idle timeout after its last byte, not a nanosecond before. Both cuts are
// resets. On the loop's clock, moved by hand: each move is a turn of the
// loop, which fires what is due.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	start := time.Now()
	clk := clock.NewFake(start)
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{clock: clk, fronts: []frontSpec{{name: "p", backends: []string{k.Addr},
		keys: fmt.Sprintf("idle_timeout = %q", idle)}}})
	l := h.loops[0]
	silent := h.open("p", k)
	defer silent.close()
	oneWay := h.open("p", k)
	defer oneWay.close()
	// Both relaying, their idle timers armed at 0 on the loop's clock:
	// the taker has a connection once its handshake is done, which may
	// be before the loop has seen its connect complete.
	testnet.Eventually(t, "both connections to relay", func() bool {
		n := 0
		for _, c := range h.conns() {
			if c.phase == phaseRelaying {
				n++
			}
		}
		return n == 2
	})
	held := func() int { return int(l.Conns()) }
	advance := func(d time.Duration) {
		// Every byte acknowledged first: a send queue that changes between
		// two looks counts as traffic (checkIdle), so a delayed ACK would
		// move the cut.
		testnet.Eventually(t, "the loop's send queues to drain", func() bool {
			var q int
			h.on(l, func() {
				for c := range l.conns {
					q += rawsys.Unacked(c.cl.fd) + rawsys.Unacked(c.be.fd)
				}
			})
			return q == 0
		})
		h.on(l, func() { clk.Advance(d) })
		// The turn that ran the task fires what is due after it; a task
		// posted now runs in the next turn.
		h.on(l, func() {})
	}
	oneWay.backend.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := 1; i <= 12; i++ {
		if _, err := oneWay.client.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(oneWay.backend, make([]byte, 1)); err != nil {
			t.Fatalf("one-way connection, byte %d: %v", i, err)
		}
		advance(idle / 3)
		want := 2
		if time.Duration(i)*idle/3 >= idle {
			want = 1 // the silent one is cut once its idle timeout has passed
		}
		if got := held(); got != want {
			t.Fatalf("%v into the test: %d connections held, want %d", time.Duration(i)*idle/3, got, want)
		}
	}
	mustReset(t, "client of the silent connection", silent.client)
	mustReset(t, "backend of the silent connection", silent.backend)
	// The last byte was relayed idle/3 ago.
	advance(idle - idle/3 - 1)
	if got := held(); got != 1 {
		t.Fatalf("one-way connection cut before an idle timeout after its last byte")
	}
	advance(1)
	if got := held(); got != 0 {
		t.Fatalf("one-way connection still held an idle timeout after its last byte")
	}
	mustReset(t, "backend of the one-way connection", oneWay.backend)
	mustReset(t, "client of the one-way connection", oneWay.client)
}

// A slow reader draining what the loop handed over, for many idle
// timeouts, is not idle: bytes trickle out of the loop's socket buffer.
// The loops run on an injected clock: between two reads of the client,
// once the loop has taken the read in (it moved bytes, or the connection
// is done), the clock moves half an idle timeout, so the whole stream
// spans many idle timeouts of the loop's time whatever the machine's
// load, and the cut, were it wrong, would come at a known turn.
func TestSlowReaderIsNotIdle(t *testing.T) {
	const idle = 250 * time.Millisecond
	start := time.Now()
	clk := clock.NewFake(start)
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{clock: clk, fronts: []frontSpec{{name: "p", backends: []string{k.Addr},
		keys: fmt.Sprintf("idle_timeout = %q", idle)}}})
	l := h.loops[0]
	payload := randomBytes(t, 512<<10)
	p := h.open("p", k)
	defer p.close()
	// Small socket buffers on the client side make the loop itself wait
	// on the slow reader: bytes trickle out of its socket and its pipe.
	p.client.SetReadBuffer(16 << 10)
	h.setLoopSockopt(l, true, unix.SO_SNDBUF, 16<<10)
	p.client.CloseWrite() // the client only listens
	writer := make(chan struct{})
	defer func() { p.close(); <-writer }() // the writer ends once its socket is closed
	go func() {
		defer close(writer)
		p.backend.Write(payload)
		p.backend.CloseWrite()
	}()
	// What the loop's side shows of a read: the send queue of its client
	// socket (the kernel moved bytes out of it) and when the loop last
	// moved bytes itself.
	look := func() (q int, active int64, open bool) {
		h.on(l, func() {
			for c := range l.conns {
				open, active = true, c.lastActive
				q, _ = unix.IoctlGetInt(c.cl.fd, unix.TIOCOUTQ)
			}
		})
		return q, active, open
	}
	got := make([]byte, 0, len(payload))
	buf := make([]byte, 64<<10)
	p.client.SetReadDeadline(time.Now().Add(60 * time.Second))
	rounds := 0
	for {
		q0, _, _ := look()
		// One slow read takes all the socket holds (its buffer is far
		// smaller than buf), so its window opens wide and the loop's
		// side must move.
		n, err := p.client.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("slow reader cut after %d bytes and %d half idle timeouts: %v", len(got), rounds, err)
		}
		testnet.Eventually(t, "the loop's side to move on the read", func() bool {
			q, active, open := look()
			return !open || q != q0 || active == int64(clk.Now().Sub(start))
		})
		h.on(l, func() { clk.Advance(idle / 2) })
		h.on(l, func() {}) // the turn that ran the task fired what was due
		rounds++
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("client got %d bytes, want the %d sent", len(got), len(payload))
	}
	if rounds < 8 {
		t.Fatalf("the stream took %d half idle timeouts: the test did not outlast the idle timeout", rounds)
	}
	t.Logf("%d bytes read in %d rounds: %v of the loop's time", len(got), rounds, clk.Now().Sub(start))
	testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
	if n := h.logs.count("relay reset"); n != 0 {
		t.Fatalf("the relay ended with a reset, want completed")
	}
}

// An idle connection holds its two sockets and nothing else: no pipe,
// whatever it moved before.
func TestIdleConnectionHoldsTwoFDsAndNoPipe(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	before := countFDs(t)

	const n = 20
	for range n {
		p := h.open("p", k)
		defer p.close()
		p.client.SetDeadline(time.Now().Add(30 * time.Second))
		p.backend.SetDeadline(time.Now().Add(30 * time.Second))
		// Data flows each way, a stream first so each direction has used
		// a pipe, then a small message.
		big := randomBytes(t, 256<<10)
		go p.client.Write(big)
		if _, err := io.ReadFull(p.backend, make([]byte, len(big))); err != nil {
			t.Fatal(err)
		}
		go p.backend.Write(big)
		if _, err := io.ReadFull(p.client, make([]byte, len(big))); err != nil {
			t.Fatal(err)
		}
		p.client.Write([]byte("hello"))
		if _, err := io.ReadFull(p.backend, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
		p.backend.Write([]byte("world"))
		if _, err := io.ReadFull(p.client, make([]byte, 5)); err != nil {
			t.Fatal(err)
		}
	}
	testnet.Eventually(t, "every pipe back in the pool", func() bool { return h.pipes.Stats().Busy() == 0 })
	for _, l := range h.loops {
		h.on(l, func() { l.scratch.Pipes.Trim() }) // the idle ones are the loop's
	}
	// The test holds two ends per connection itself; the loop holds the
	// other two and nothing else.
	if got, want := countFDs(t)-before, 4*n; got != want {
		t.Fatalf("fds grew by %d for %d idle connections, want %d (2 test ends + 2 loop sockets each)", got, n, want)
	}
	if s := h.pipes.Stats(); s.Open != 0 {
		t.Fatalf("idle connections hold %d pipes, want 0", s.Open)
	}
	if got := countPipeFDs(t); got != h.pipeFDs {
		t.Fatalf("%d pipe fds open with idle connections, %d before", got, h.pipeFDs)
	}
	for _, c := range h.conns() {
		if c.pending[0] || c.pending[1] {
			t.Fatalf("an idle connection holds bytes: %+v", c)
		}
	}
}

// Small messages are copied (reading and writing them beats a pipe round
// trip); streams are spliced.
func TestSmallMessagesAreCopiedStreamsSpliced(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	p := h.open("p", k)
	defer p.close()
	p.backend.SetDeadline(time.Now().Add(30 * time.Second))
	for range 20 {
		p.client.Write([]byte("ping"))
		if _, err := io.ReadFull(p.backend, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
	}
	// Counters are flushed once per wake-up, which may be after the
	// backend has read the bytes.
	movedAtLeast := func(n int64) {
		testnet.Eventually(t, "the loop to count the bytes delivered", func() bool {
			return h.sh.Spliced.Load()+h.sh.Copied.Load() >= n
		})
	}
	movedAtLeast(80)
	if spliced, copied := h.sh.Spliced.Load(), h.sh.Copied.Load(); spliced != 0 || copied != 80 {
		t.Fatalf("small messages: spliced %d copied %d, want all 80 bytes copied", spliced, copied)
	}
	if s := h.pipes.Stats(); s.Open != 0 {
		t.Fatalf("small messages took %d pipes, want none", s.Open)
	}
	// A stream switches to splicing.
	payload := randomBytes(t, 8<<20)
	go p.client.Write(payload)
	if _, err := io.ReadFull(p.backend, make([]byte, len(payload))); err != nil {
		t.Fatal(err)
	}
	movedAtLeast(80 + int64(len(payload)))
	spliced, copied := h.sh.Spliced.Load(), h.sh.Copied.Load()
	if spliced+copied != 80+int64(len(payload)) || spliced < int64(len(payload))*9/10 {
		t.Fatalf("stream: spliced %d copied %d, want at least 90%% of %d spliced", spliced, copied, len(payload))
	}
}

// When the pipe pool is at its cap, streams are copied, byte-exact.
func TestRelayCopiesWhenPipePoolAtCap(t *testing.T) {
	k := testnet.StartTaker(t)
	pipes := splice.NewPipePool(splice.PipePoolConfig{Size: 1 << 20, MaxOpen: 1})
	h := newHarness(t, harnessOpts{pipes: pipes, fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})

	// A connection whose backend never reads holds the only pipe, full.
	// Its bytes wait in the loop's socket while the loop is held still, so
	// every read after the first is large and spliced: the stream blocks
	// with its bytes in the pipe, not in a copy buffer (as it may when a
	// writer racing the loop leaves a short read last).
	const reservoir = 16 << 20
	hog := h.open("p", k)
	defer hog.close()
	l := h.loops[0]
	var hogFD int
	var bufErr error
	h.on(l, func() {
		for c := range l.conns {
			hogFD = c.cl.fd
			bufErr = unix.SetsockoptInt(c.cl.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 2*reservoir)
		}
	})
	skipWithoutForcedBuffers(t, bufErr)
	release := h.hold(l)
	hog.client.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := hog.client.Write(make([]byte, reservoir)); err != nil {
		release()
		t.Fatal(err)
	}
	inq := func() int { n, _ := unix.IoctlGetInt(hogFD, unix.SIOCINQ); return n }
	reached := testnet.WaitUntil(20*time.Second, func() bool { return inq() == reservoir })
	release()
	if !reached {
		t.Fatalf("only %d of %d bytes reached the loop's socket", inq(), reservoir)
	}
	testnet.Eventually(t, "the stuck stream to hold the only pipe", func() bool {
		if pipes.Stats().Busy() != 1 {
			return false
		}
		for _, c := range h.conns() {
			if c.pending[0] {
				return true
			}
		}
		return false
	})
	spliced, copied := h.sh.Spliced.Load(), h.sh.Copied.Load()

	p := h.open("p", k)
	defer p.close()
	if err := exchange(p, randomBytes(t, 3<<20), randomBytes(t, 1<<20)); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the copied bytes to be counted", func() bool { return h.sh.Copied.Load()-copied >= 4<<20 })
	if c := h.sh.Copied.Load() - copied; c != 4<<20 {
		t.Fatalf("%d bytes copied, want the %d exchanged", c, 4<<20)
	}
	if s := h.sh.Spliced.Load() - spliced; s != 0 {
		t.Fatalf("%d bytes spliced with no pipe to be had, want every byte copied", s)
	}
	if s := pipes.Stats(); s.Open != 1 {
		t.Fatalf("%d pipes open, want the cap of 1", s.Open)
	}
}
