package splice

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

func newPool() *PipePool {
	return NewPipePool(PipePoolConfig{Size: 1 << 20, MaxOpen: 256, MaxIdle: 16})
}

// exchange sends payloads both ways at once over one proxied connection,
// each side half-closing when done, and checks that each side received
// exactly what the other sent.
func exchange(p *proxied, up, down []byte) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	send := func(c *net.TCPConn, data []byte) {
		defer wg.Done()
		if _, err := c.Write(data); err != nil {
			errs <- err
			return
		}
		if err := c.CloseWrite(); err != nil {
			errs <- err
		}
	}
	recv := func(c *net.TCPConn, want []byte, who string) {
		defer wg.Done()
		h := sha256.New()
		n, err := io.Copy(h, c)
		if err != nil {
			errs <- err
			return
		}
		if n != int64(len(want)) || !bytes.Equal(h.Sum(nil), sha256Sum(want)) {
			errs <- errors.New(who + ": received bytes differ from sent")
		}
	}
	wg.Add(4)
	go send(p.client, up)
	go send(p.backend, down)
	go recv(p.backend, up, "backend")
	go recv(p.client, down, "client")
	wg.Wait()
	close(errs)
	return <-errs
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRelayByteExactManyConcurrent(t *testing.T) {
	pool := newPool()
	checkLeaks(t, pool)
	r := newRig(t, Config{Pipes: pool, IdleTimeout: time.Minute})

	const conns = 64
	const size = 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	var mu sync.Mutex
	var results []Result
	for i := 0; i < conns; i++ {
		p := r.open()
		up, down := randomBytes(t, size+i), randomBytes(t, size-i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.close()
			if err := exchange(p, up, down); err != nil {
				errs <- err
				return
			}
			res := p.waitResult(t)
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
			if res.ToBackend != int64(len(up)) || res.ToClient != int64(len(down)) {
				errs <- errors.New("byte counts differ from payload sizes")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, res := range results {
		if res.Outcome != Completed {
			t.Errorf("outcome %v, want completed", res.Outcome)
		}
	}
	spliced, copied := r.relayer.PathBytes()
	// Streams are spliced; only reads under streamThreshold (the first
	// bytes of a burst) are copied.
	if want := int64(conns * 2 * size); spliced+copied != want || spliced < want*3/4 {
		t.Errorf("path bytes: spliced %d copied %d, want all %d accounted and most spliced", spliced, copied, want)
	}
	if got := r.meter.ToBackend.Load() + r.meter.ToClient.Load(); got != int64(conns*2*size) {
		t.Errorf("meter counted %d bytes, want %d", got, conns*2*size)
	}
}

func TestRelayHalfClose(t *testing.T) {
	tests := []struct {
		name        string
		closerFirst func(p *proxied) (*net.TCPConn, *net.TCPConn)
	}{
		{"client shuts write, still gets the whole reply", func(p *proxied) (*net.TCPConn, *net.TCPConn) { return p.client, p.backend }},
		{"backend shuts write, still gets the client's data", func(p *proxied) (*net.TCPConn, *net.TCPConn) { return p.backend, p.client }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool()
			checkLeaks(t, pool)
			r := newRig(t, Config{Pipes: pool})
			p := r.open()
			defer p.close()
			first, second := tc.closerFirst(p)

			request := randomBytes(t, 300<<10)
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
			go func() {
				second.Write(reply)
				second.CloseWrite()
			}()
			got, err = io.ReadAll(first)
			if err != nil || !bytes.Equal(got, reply) {
				t.Fatalf("half-closed side read %d bytes (err %v), want %d", len(got), err, len(reply))
			}
			if res := p.waitResult(t); res.Outcome != Completed {
				t.Fatalf("outcome %v, want completed", res.Outcome)
			}
		})
	}
}

func TestRelayPassesResetOn(t *testing.T) {
	tests := []struct {
		name    string
		resetBy func(p *proxied) *net.TCPConn
		seenBy  func(p *proxied) *net.TCPConn
		want    Outcome
	}{
		{"backend reset reaches client", func(p *proxied) *net.TCPConn { return p.backend }, func(p *proxied) *net.TCPConn { return p.client }, BackendReset},
		{"client reset reaches backend", func(p *proxied) *net.TCPConn { return p.client }, func(p *proxied) *net.TCPConn { return p.backend }, ClientReset},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool()
			checkLeaks(t, pool)
			r := newRig(t, Config{Pipes: pool})
			p := r.open()
			defer p.close()
			// Prove the path works, then reset.
			p.client.Write([]byte("ping"))
			buf := make([]byte, 4)
			if _, err := io.ReadFull(p.backend, buf); err != nil {
				t.Fatal(err)
			}
			resetter := tc.resetBy(p)
			resetter.SetLinger(0)
			resetter.Close()

			peer := tc.seenBy(p)
			peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := peer.Read(buf)
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("peer read error %v, want ECONNRESET (a reset, not a clean close)", err)
			}
			if res := p.waitResult(t); res.Outcome != tc.want {
				t.Fatalf("outcome %v, want %v", res.Outcome, tc.want)
			}
		})
	}
}

func TestRelayIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	pool := newPool()
	checkLeaks(t, pool)
	r := newRig(t, Config{Pipes: pool, IdleTimeout: idle})
	measureIdle(t, idle, func() (time.Duration, error) { return idleTimeoutAttempt(t, r, idle) })
}

// idleTimeoutAttempt opens a silent connection and one that carries
// traffic one way every idle/3 for 4 idle periods: the silent one must
// time out, the other must outlive it and end an idle timeout after its
// last byte.
func idleTimeoutAttempt(t *testing.T, r *rig, idle time.Duration) (gap time.Duration, err error) {
	// The clock starts before the relays do: the time measured below is
	// then never shorter than a relay's own idle clock.
	start := time.Now()
	silent := r.open()
	defer silent.close()
	oneWay := r.open()
	defer oneWay.close()

	stop := make(chan struct{})
	writerDone := make(chan struct{})
	// Read only once writerDone is closed.
	var sent int            // bytes written
	var lastWrite time.Time // taken before the last write began
	var maxGap time.Duration
	defer func() { close(stop); <-writerDone }() // on every path, failures included
	go func() {
		defer close(writerDone)
		prev := start
		for time.Since(start) < 4*idle {
			select {
			case <-stop:
				return
			case <-time.After(idle / 3):
			}
			before := time.Now()
			if _, err := oneWay.client.Write([]byte{'x'}); err != nil {
				return
			}
			now := time.Now()
			maxGap = max(maxGap, now.Sub(prev))
			prev, lastWrite = now, before
			sent++
		}
	}()

	res := silent.waitResult(t)
	if res.Outcome != IdleTimeout {
		t.Fatalf("silent connection outcome %v, want idle-timeout", res.Outcome)
	}
	if el := time.Since(start); el < idle {
		t.Fatalf("silent connection closed after %v, before the %v idle timeout", el, idle)
	}
	silent.client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client of the idle connection read %v, want EOF", err)
	}

	select {
	case <-writerDone:
	case <-time.After(20 * time.Second):
		t.Fatal("writer never finished")
	}
	// Every byte arrives: the relay was up each time one was sent.
	got := make([]byte, sent)
	oneWay.backend.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.ReadFull(oneWay.backend, got); err != nil {
		return maxGap, fmt.Errorf("one-way connection cut although traffic kept flowing: %d of %d bytes arrived (%v)", n, sent, err)
	}
	if sent < 3 {
		return maxGap, fmt.Errorf("only %d writes in %v", sent, 4*idle)
	}
	// And it ends no earlier than an idle timeout after the last byte
	// (seen here no earlier than it ended; that byte was read by the relay
	// no earlier than it began to be written).
	res = oneWay.waitResult(t)
	if el := time.Since(lastWrite); el < idle {
		t.Fatalf("one-way connection ended %v after its last byte, before the %v idle timeout", el, idle)
	}
	if res.Outcome != IdleTimeout {
		t.Fatalf("one-way connection outcome %v once silent, want idle-timeout", res.Outcome)
	}
	return maxGap, nil
}

func TestSmallMessagesAreCopiedStreamsSpliced(t *testing.T) {
	pool := newPool()
	checkLeaks(t, pool)
	r := newRig(t, Config{Pipes: pool})
	p := r.open()
	defer p.close()
	// Ping-pong of small messages: read and write beat a pipe round trip.
	for i := 0; i < 20; i++ {
		p.client.Write([]byte("ping"))
		if _, err := io.ReadFull(p.backend, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
	}
	// The relay counts a write once it has returned, which may be after
	// the backend has read the bytes.
	movedAtLeast := func(n int64) {
		testnet.Eventually(t, "the relay to count the bytes delivered", func() bool {
			spliced, copied := r.relayer.PathBytes()
			return spliced+copied >= n
		})
	}
	movedAtLeast(80)
	if spliced, copied := r.relayer.PathBytes(); spliced != 0 || copied != 80 {
		t.Fatalf("small messages: spliced %d copied %d, want all 80 bytes copied", spliced, copied)
	}
	if s := pool.Stats(); s.Open != 0 {
		t.Fatalf("small messages took %d pipes, want none", s.Open)
	}
	// A stream switches to splicing.
	payload := randomBytes(t, 8<<20)
	go p.client.Write(payload)
	if _, err := io.ReadFull(p.backend, make([]byte, len(payload))); err != nil {
		t.Fatal(err)
	}
	movedAtLeast(80 + int64(len(payload)))
	spliced, copied := r.relayer.PathBytes()
	if spliced+copied != 80+int64(len(payload)) || spliced < int64(len(payload))*9/10 {
		t.Fatalf("stream: spliced %d copied %d, want at least 90%% of %d spliced", spliced, copied, len(payload))
	}
}

func TestIdleConnectionHoldsTwoFDsAndNoPipe(t *testing.T) {
	pool := newPool()
	checkLeaks(t, pool)
	r := newRig(t, Config{Pipes: pool})
	pool.Trim()
	before := countFDs(t)

	const n = 20
	conns := make([]*proxied, n)
	for i := range conns {
		p := r.open()
		defer p.close()
		conns[i] = p
		// Data flows each way, a stream first so each direction has
		// used a pipe, then a small message.
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
	testnet.Eventually(t, "every pipe back in the pool", func() bool { return pool.Stats().Busy() == 0 })
	pool.Trim()
	// The test holds two ends per connection itself; the relay holds the
	// other two and nothing else.
	if got, want := countFDs(t)-before, 4*n; got != want {
		t.Fatalf("fds grew by %d for %d idle connections, want %d (2 test ends + 2 relay sockets each)", got, n, want)
	}
	if s := pool.Stats(); s.Open != 0 {
		t.Fatalf("idle connections hold %d pipes, want 0", s.Open)
	}
}

func TestRelayCopiesWhenNoPipe(t *testing.T) {
	pool := NewPipePool(PipePoolConfig{MaxOpen: 1})
	checkLeaks(t, pool)
	held := pool.get() // the only pipe allowed: relays must copy
	if held == nil {
		t.Fatal("could not create a pipe")
	}
	defer pool.put(held)
	r := newRig(t, Config{Pipes: pool})
	p := r.open()
	defer p.close()
	if err := exchange(p, randomBytes(t, 3<<20), randomBytes(t, 1<<20)); err != nil {
		t.Fatal(err)
	}
	p.waitResult(t)
	spliced, copied := r.relayer.PathBytes()
	if spliced != 0 || copied != 4<<20 {
		t.Fatalf("spliced %d copied %d, want all %d bytes copied", spliced, copied, 4<<20)
	}
}

func TestRelayNonTCPUsesCopy(t *testing.T) {
	checkLeaks(t)
	r := NewRelayer(Config{Pipes: newPool()})
	clientApp, clientRelay := net.Pipe()
	backendRelay, backendApp := net.Pipe()
	done := make(chan Result, 1)
	go func() { done <- r.Relay(clientRelay, backendRelay, nil) }()

	msg := randomBytes(t, 100<<10)
	go clientApp.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(backendApp, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("backend got %v, want the client's bytes", err)
	}
	clientApp.Close() // net.Pipe cannot half-close: the relay ends
	res := <-done
	backendApp.Close()
	if _, copied := r.PathBytes(); copied != int64(len(msg)) || res.ToBackend != int64(len(msg)) {
		t.Fatalf("copied %d, result %+v, want %d bytes by copy", copied, res, len(msg))
	}
}

func TestRelayAbortedFromOutside(t *testing.T) {
	pool := newPool()
	checkLeaks(t, pool)
	r := newRig(t, Config{Pipes: pool})
	// The proxy force-closes relays when a shutdown runs out of time; it does
	// so by closing the sockets it handed to Relay.
	socks := make(chan [2]net.Conn, 1)
	got := make(chan Result, 1)
	go func() {
		c, _ := r.front.AcceptTCP()
		b, _ := net.DialTCP("tcp", nil, r.back.Addr().(*net.TCPAddr))
		socks <- [2]net.Conn{c, b}
		got <- r.relayer.Relay(c, b, nil)
	}()
	client, err := net.DialTCP("tcp", nil, r.front.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	backend := <-r.accepted
	defer backend.Close()
	client.Write([]byte("x"))
	io.ReadFull(backend, make([]byte, 1))
	s := <-socks
	s[0].Close()
	s[1].Close()
	select {
	case res := <-got:
		if res.Outcome != Aborted {
			t.Fatalf("outcome %v, want aborted", res.Outcome)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("relay did not end after its sockets were closed")
	}
}

func TestSlowReaderIsNotIdle(t *testing.T) {
	// The backend sends 2 MiB at once; the client reads it slowly, for many
	// idle timeouts. Small socket buffers on the client side make the relay
	// itself wait on the slow reader: bytes trickle out of its pipe, and
	// that is traffic the relay must not cut.
	const idle = 250 * time.Millisecond
	pool := newPool()
	checkLeaks(t, pool)
	r := newRig(t, Config{Pipes: pool, IdleTimeout: idle})
	r.tuneFront = func(c *net.TCPConn) { c.SetWriteBuffer(16 << 10) }
	payload := randomBytes(t, 2<<20)
	measureIdle(t, idle, func() (time.Duration, error) { return slowReaderAttempt(t, r, idle, payload) })
}

func slowReaderAttempt(t *testing.T, r *rig, idle time.Duration, payload []byte) (gap time.Duration, err error) {
	const head = 64 << 10 // fits in the socket buffers: written at once
	p := r.openWith(func(p *proxied) {
		p.client.SetReadBuffer(16 << 10)
		p.client.CloseWrite() // the client only listens
		// The first bytes are already waiting when the relay starts: its
		// idle clock must not run out before the test gets to send them.
		if _, err := p.backend.Write(payload[:head]); err != nil {
			t.Fatal(err)
		}
	})
	writer := make(chan struct{})
	defer func() { p.close(); <-writer }() // the writer ends once its socket is closed
	go func() {
		defer close(writer)
		p.backend.Write(payload[head:])
		p.backend.CloseWrite()
	}()
	got := make([]byte, 0, len(payload))
	buf := make([]byte, 64<<10)
	start := time.Now()
	prev := start
	for {
		time.Sleep(40 * time.Millisecond)
		n, err := p.client.Read(buf)
		now := time.Now()
		gap, prev = max(gap, now.Sub(prev)), now
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return gap, fmt.Errorf("slow reader cut after %d bytes and %v: %v", len(got), time.Since(start), err)
		}
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("client got %d bytes, want the %d sent", len(got), len(payload))
	}
	if el := time.Since(start); el < 3*idle {
		t.Fatalf("read took only %v: the test did not outlast the idle timeout", el)
	}
	if res := p.waitResult(t); res.Outcome != Completed {
		t.Fatalf("outcome %v, want completed", res.Outcome)
	}
	return gap, nil
}
