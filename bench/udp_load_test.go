package main

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The udp scenario's load generator against the harness's own UDP
// backends, in this process, for a fraction of a second each: no proxy,
// no external tool.

// testUDPServer binds a backend socket on a free loopback port and runs
// serve on it until the test ends.
func testUDPServer(t testing.TB, serve func(fd int, done <-chan struct{}) error) string {
	t.Helper()
	fd, err := udpBind(&unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := serve(fd, done); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	t.Cleanup(func() {
		close(done)
		wg.Wait() // the server sees done within its receive timeout
		unix.Close(fd)
	})
	return loopAddr(sa.(*unix.SockaddrInet4).Port)
}

// An echo loses nothing: every request is answered, once. The timeout is
// generous, so a reply the busy machine delays is not taken for a loss;
// how many replies the run gets is BenchmarkUDPRequestReply's.
func TestUDPRequestReply(t *testing.T) {
	addr := testUDPServer(t, serveUDPEcho)
	cfg := udpRRConfig{addr: addr, sockets: 64, window: 16, size: udpDatagram, d: 300 * time.Millisecond, timeout: 10 * time.Second}
	res, err := udpRequestReply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.replies == 0 || res.lost != 0 || res.stale != 0 || res.errors != 0 {
		t.Errorf("echo without loss: %+v", summaryOf(res))
	}
	if res.sent != res.replies+res.lost || res.inWindow > res.replies || len(res.latUS) != res.replies {
		t.Errorf("counts do not add up: %+v, %d latencies", summaryOf(res), len(res.latUS))
	}
}

// A lossy echo drops every 10th request: each is counted lost once its
// timeout passes, and nothing else is (the timeout is generous for the
// replies the echo does send).
func TestUDPRequestReplyCountsLoss(t *testing.T) {
	var n atomic.Int64
	addr := testUDPServer(t, func(fd int, done <-chan struct{}) error {
		buf := make([]byte, 2048)
		for !stopped(done) {
			m, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // the receive timeout, or EINTR
			}
			if n.Add(1)%10 == 0 {
				continue
			}
			_ = unix.Sendto(fd, buf[:m], 0, from)
		}
		return nil
	})
	cfg := udpRRConfig{addr: addr, sockets: 32, window: 8, size: 64, d: 300 * time.Millisecond, timeout: 2 * time.Second}
	res, err := udpRequestReply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.lost == 0 || res.sent != res.replies+res.lost || res.stale != 0 {
		t.Fatalf("loss not counted: %+v", summaryOf(res))
	}
	// Every 10th datagram the echo saw was dropped, and only those.
	if want := int(n.Load() / 10); res.lost != want {
		t.Errorf("lost %d, the echo dropped %d", res.lost, want)
	}
}

// Nothing listens: every send or read fails (ECONNREFUSED); the run ends
// with an error, never hangs.
func TestUDPRequestReplyNothingListening(t *testing.T) {
	fd, err := udpBind(&unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	unix.Close(fd) // the port is free again: ICMP port unreachable
	cfg := udpRRConfig{addr: loopAddr(sa.(*unix.SockaddrInet4).Port), sockets: 8, window: 4, size: 64,
		d: 200 * time.Millisecond, timeout: 50 * time.Millisecond}
	res, err := udpRequestReply(cfg)
	if err == nil || res.replies != 0 || res.errors == 0 {
		t.Fatalf("no listener: err %v, %+v", err, summaryOf(res))
	}
}

// A sink loses nothing: everything sent is counted. The stall is
// generous, so a sink the busy machine holds off its CPU is waited for,
// not written off; the rate is BenchmarkUDPOneWay's.
func TestUDPOneWay(t *testing.T) {
	var count atomic.Uint64
	addr := testUDPServer(t, func(fd int, done <-chan struct{}) error { return serveUDPSink(fd, &count, done) })
	cfg := udpOneWayConfig{addr: addr, clients: udpOWClients, window: udpOWWindow, batch: udpOWBatch, size: udpDatagram,
		d: 300 * time.Millisecond, stall: 2 * time.Second, settle: 30 * time.Second}
	res, err := udpOneWay(cfg, count.Load)
	if err != nil {
		t.Fatal(err)
	}
	if res.sent == 0 || res.delivered != res.sent || res.lost != 0 || res.inWindow > res.delivered || res.lossPct() != 0 {
		t.Errorf("sink without loss: %+v", res)
	}
}

// A sink that never counts (a proxy that drops everything): the window is
// written off at every stall, so the sender goes on at a trickle, with
// everything lost. At most a window is sent per stall the run lasted (a
// busy machine only makes it fewer), and the run ends with an error.
func TestUDPOneWayStalls(t *testing.T) {
	fd, err := udpBind(&unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd) // bound, never read: the kernel queues, then drops
	sa, _ := unix.Getsockname(fd)
	cfg := udpOneWayConfig{addr: loopAddr(sa.(*unix.SockaddrInet4).Port), clients: 2, window: 64, batch: 16, size: 64,
		d: 250 * time.Millisecond, stall: 20 * time.Millisecond, settle: 100 * time.Millisecond}
	res, err := udpOneWay(cfg, func() uint64 { return 0 })
	if err == nil {
		t.Fatalf("nothing delivered, yet no error: %+v", res)
	}
	// One window per stall, at most: the first, and one per write-off,
	// each after a stall without progress.
	if max := uint64(cfg.window) * uint64(1+res.elapsed/cfg.stall); res.sent == 0 || res.sent > max || res.lost != res.sent {
		t.Errorf("sent %d in %v (at most %d), lost %d", res.sent, res.elapsed, max, res.lost)
	}
}

// The echo answers with what it got, from the port it got it on, in batches.
func TestServeUDPEchoBatch(t *testing.T) {
	addr := testUDPServer(t, serveUDPEcho)
	fds, err := udpClientSockets(addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(fds)
	tv := unix.NsecToTimeval(int64(time.Second))
	_ = unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetNonblock(fds[0], false)
	for i := range 100 {
		msg := binary.LittleEndian.AppendUint64(nil, uint64(i))
		if _, err := unix.Write(fds[0], msg); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64)
	for i := range 100 {
		n, err := unix.Read(fds[0], buf)
		if err != nil || n != 8 || binary.LittleEndian.Uint64(buf) != uint64(i) {
			t.Fatalf("reply %d: %d bytes %x, %v", i, n, buf[:max(n, 0)], err)
		}
	}
}

// The counter file is shared memory: what one mapping adds, another reads.
func TestUDPCounterShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "count")
	reader, err := createUDPCounter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.close()
	writer, err := openUDPCounter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.close()
	writer.n.Add(41)
	writer.n.Add(1)
	if got := reader.load(); got != 42 {
		t.Errorf("reader sees %d, want 42", got)
	}
	if err := writer.close(); err != nil || writer.close() != nil {
		t.Errorf("close twice: %v", err)
	}
}

// The timing the tests above leave out: the rate and latency the load
// generator gets from the harness's own echo and sink, and how far past
// its duration a run ends (the drain of its last replies, the settle).
//
//	go test -run - -bench 'UDPRequestReply|UDPOneWay' ./bench

func BenchmarkUDPRequestReply(b *testing.B) {
	addr := testUDPServer(b, serveUDPEcho)
	cfg := udpRRConfig{addr: addr, sockets: 64, window: 16, size: udpDatagram, d: 300 * time.Millisecond, timeout: udpRRTimeout}
	var rate, p50, over float64
	for b.Loop() {
		t0 := time.Now()
		res, err := udpRequestReply(cfg)
		if err != nil {
			b.Fatal(err)
		}
		over += float64(time.Since(t0)-cfg.d) / 1e6
		rate += float64(res.inWindow) / cfg.d.Seconds()
		slices.Sort(res.latUS) // not empty: no error means a reply
		p50 += median(res.latUS)
	}
	n := float64(b.N)
	b.ReportMetric(rate/n, "replies/s")
	b.ReportMetric(p50/n, "p50-us")
	b.ReportMetric(over/n, "overrun-ms")
}

func BenchmarkUDPOneWay(b *testing.B) {
	var count atomic.Uint64
	addr := testUDPServer(b, func(fd int, done <-chan struct{}) error { return serveUDPSink(fd, &count, done) })
	cfg := udpOneWayConfig{addr: addr, clients: udpOWClients, window: udpOWWindow, batch: udpOWBatch, size: udpDatagram,
		d: 300 * time.Millisecond, stall: udpOWStall, settle: udpOWSettle}
	var rate, lost, over float64
	for b.Loop() {
		t0 := time.Now()
		res, err := udpOneWay(cfg, count.Load)
		if err != nil {
			b.Fatal(err)
		}
		over += float64(time.Since(t0)-cfg.d) / 1e6
		rate += float64(res.inWindow) / res.elapsed.Seconds()
		lost += res.lossPct()
	}
	n := float64(b.N)
	b.ReportMetric(rate/n, "datagrams/s")
	b.ReportMetric(lost/n, "lost-%")
	b.ReportMetric(over/n, "overrun-ms")
}

type rrSummary struct{ sent, replies, inWindow, lost, stale, errors int }

func summaryOf(r udpRRResult) rrSummary {
	return rrSummary{r.sent, r.replies, r.inWindow, r.lost, r.stale, r.errors}
}
