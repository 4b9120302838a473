package relay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/reactor"
	"github.com/l4lb/l4lb/pkg/splice"
)

// How long a small request/response round trip takes through a loop that
// is also relaying a bulk stream: the fairness budget at work, as a
// measure. It is a benchmark, not a test: whether the bulk keeps the
// loop's socket full while the small client runs depends on how busy the
// machine is (this process's writer races the loop). That the budget lets
// small connections through within a turn is tested, deterministically,
// by TestBulkStreamYieldsWithinATurn.
func BenchmarkSmallRoundTripBesideBulk(b *testing.B) {
	sink := testnet.StartSink(b)
	echo := testnet.StartBackend(b, "echo", "")
	pools := buildPools(b, []frontSpec{
		{name: "bulk", backends: []string{sink.Addr}},
		{name: "small", backends: []string{echo.Addr}},
	})
	sh := NewShared(1000, splice.NewPipePool(splice.PipePoolConfig{Size: 1 << 20, MaxOpen: 16, MaxIdle: 4}), nil)
	rl, err := reactor.New(reactor.Config{WakeCoalesce: config.DefaultWakeCoalesce})
	if err != nil {
		b.Fatal(err)
	}
	l := New(rl, sh)
	addrs := map[string]string{}
	for _, name := range []string{"bulk", "small"} {
		socks, err := listener.Bind(name, "127.0.0.1:0", 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.AddListener(socks.FDs[0], NewFront(name, pools[name])); err != nil {
			b.Fatal(err)
		}
		addrs[name] = socks.Addr.String()
	}
	l.r.Start()
	defer func() { l.r.Stop(); l.r.Wait() }()

	bulk, err := dialTCP(addrs["bulk"])
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	var sent atomic.Int64
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		chunk := make([]byte, 1<<20)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := bulk.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); bulk.Close(); <-writer }()

	c, err := dialTCP(addrs["small"])
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Minute))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	msg := fmt.Sprintf("%063d\n", 0) // 64 bytes
	before := sent.Load()
	b.ResetTimer()
	for b.Loop() {
		if _, err := io.WriteString(c, msg); err != nil {
			b.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != msg {
			b.Fatalf("%q, %v", line, err)
		}
	}
	b.ReportMetric(float64(sent.Load()-before)/float64(b.N), "bulk-B/op")
}

// The same in loop turns, deterministically: a bulk stream with a
// reservoir of bytes ready to move (already in the loop's socket, with
// room for all of them on the way out) yields after its budget, so small
// requests that became readable in the same turn are forwarded before the
// reservoir is drained. The loop is held still (a task that blocks) while
// the reservoir and the requests pile up, then a second task, queued
// behind them, looks at what the turn did.
func TestBulkStreamYieldsWithinATurn(t *testing.T) {
	for _, noPipes := range []bool{false, true} {
		name := "spliced"
		if noPipes {
			name = "copied"
		}
		t.Run(name, func(t *testing.T) { bulkYieldsWithinATurn(t, noPipes) })
	}
}

func bulkYieldsWithinATurn(t *testing.T, noPipes bool) {
	const (
		smallClients = 50
		reservoir    = 24 << 20
	)
	sink := testnet.StartSink(t)
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{noPipes: noPipes, fronts: []frontSpec{
		{name: "bulk", backends: []string{sink.Addr}},
		{name: "small", backends: []string{k.Addr}},
	}})
	l := h.loops[0]
	bulk := h.dial("bulk")
	defer bulk.Close()
	small := make([]*proxied, smallClients)
	for i := range small {
		small[i] = h.open("small", k)
		defer small[i].close()
	}
	testnet.Eventually(t, "every connection to relay", func() bool {
		n := 0
		for _, c := range h.conns() {
			if c.phase == phaseRelaying {
				n++
			}
		}
		return n == 1+smallClients
	})
	// Room for the reservoir: in the loop's client socket, and on its way
	// out to the sink, so the bulk never waits on a socket.
	var bulkFD int
	var smallFDs []int
	var bufErr error
	h.on(l, func() {
		for c := range l.conns {
			if c.f.Name != "bulk" {
				smallFDs = append(smallFDs, c.cl.fd)
				continue
			}
			bulkFD = c.cl.fd
			bufErr = errors.Join(
				unix.SetsockoptInt(c.cl.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 2*reservoir),
				unix.SetsockoptInt(c.be.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 2*reservoir))
		}
	})
	skipWithoutForcedBuffers(t, bufErr)

	// Hold the loop still.
	held, release := make(chan struct{}), make(chan struct{})
	l.r.Post(func() { close(held); <-release })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	<-held
	payload := make([]byte, reservoir)
	bulk.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := bulk.Write(payload); err != nil {
		t.Fatalf("filling the reservoir: %v", err)
	}
	inq := func(fd int) int { n, _ := unix.IoctlGetInt(fd, unix.SIOCINQ); return n }
	if !testnet.WaitUntil(20*time.Second, func() bool { return inq(bulkFD) == reservoir }) {
		t.Fatalf("only %d of %d bytes reached the loop's socket", inq(bulkFD), reservoir)
	}
	for _, p := range small {
		if _, err := p.client.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
	}
	for _, fd := range smallFDs {
		if !testnet.WaitUntil(20*time.Second, func() bool { return inq(fd) == 4 }) {
			t.Fatalf("a small request did not reach the loop's socket")
		}
	}

	type turn struct{ bulk, smallForwarded int64 }
	seen := make(chan turn, 1)
	l.r.Post(func() {
		var tr turn
		for c := range l.conns {
			if c.f.Name == "bulk" {
				tr.bulk = c.streams[0].Delivered
			} else if c.streams[0].Delivered > 0 {
				tr.smallForwarded++
			}
		}
		seen <- tr
	})
	close(release)
	released = true
	tr := <-seen
	t.Logf("in the turn that found them readable: %d small requests forwarded, bulk moved %d KiB of %d KiB", tr.smallForwarded, tr.bulk>>10, reservoir>>10)
	if tr.smallForwarded != smallClients {
		t.Errorf("%d of %d small requests forwarded in the turn that found them readable", tr.smallForwarded, smallClients)
	}
	if tr.bulk >= reservoir/2 {
		t.Errorf("the bulk stream moved %d KiB of its %d KiB in that turn: it did not yield", tr.bulk>>10, reservoir>>10)
	}
	// Everything goes through in the end.
	for _, p := range small {
		p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(p.backend, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
	}
	bulk.CloseWrite()
	if _, err := readToEnd(bulk, 30*time.Second); err != io.EOF {
		t.Fatalf("bulk stream ended with %v, want EOF", err)
	}
	if got := sink.Received(); got != reservoir {
		t.Fatalf("sink received %d bytes, want %d", got, reservoir)
	}
}
