package main

import (
	"encoding/binary"
	"path/filepath"
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
func testUDPServer(t *testing.T, serve func(fd int, done <-chan struct{}) error) string {
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

func TestUDPRequestReply(t *testing.T) {
	addr := testUDPServer(t, serveUDPEcho)
	cfg := udpRRConfig{addr: addr, sockets: 64, window: 16, size: udpDatagram, d: 300 * time.Millisecond, timeout: udpRRTimeout}
	res, err := udpRequestReply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.replies < 100 || res.lost != 0 || res.stale != 0 || res.errors != 0 {
		t.Errorf("echo without loss: %+v", summaryOf(res))
	}
	if res.sent != res.replies+res.lost || res.inWindow > res.replies || len(res.latUS) != res.replies {
		t.Errorf("counts do not add up: %+v, %d latencies", summaryOf(res), len(res.latUS))
	}
}

// A lossy echo drops every 10th request: each is counted lost once its
// timeout passes, and the run still ends on time.
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
	cfg := udpRRConfig{addr: addr, sockets: 32, window: 8, size: 64, d: 300 * time.Millisecond, timeout: 50 * time.Millisecond}
	t0 := time.Now()
	res, err := udpRequestReply(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > cfg.d+cfg.timeout+500*time.Millisecond {
		t.Errorf("run took %v", took)
	}
	if res.lost == 0 || res.sent != res.replies+res.lost {
		t.Fatalf("loss not counted: %+v", summaryOf(res))
	}
	// Every 10th datagram the echo saw was dropped.
	if want := int(n.Load() / 10); res.lost < want-1 || res.lost > want+1 {
		t.Errorf("lost %d, the echo dropped %d", res.lost, want)
	}
}

// Nothing listens: every send or read fails (ECONNREFUSED); the run ends
// at its time with an error, never hangs.
func TestUDPRequestReplyNothingListening(t *testing.T) {
	fd, err := udpBind(&unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	unix.Close(fd) // the port is free again: ICMP port unreachable
	cfg := udpRRConfig{addr: loopAddr(sa.(*unix.SockaddrInet4).Port), sockets: 8, window: 4, size: 64,
		d: 200 * time.Millisecond, timeout: 50 * time.Millisecond}
	t0 := time.Now()
	res, err := udpRequestReply(cfg)
	if err == nil || res.replies != 0 {
		t.Fatalf("no listener: err %v, %+v", err, summaryOf(res))
	}
	if took := time.Since(t0); took > time.Second {
		t.Errorf("run took %v", took)
	}
}

func TestUDPOneWay(t *testing.T) {
	var count atomic.Uint64
	addr := testUDPServer(t, func(fd int, done <-chan struct{}) error { return serveUDPSink(fd, &count, done) })
	cfg := udpOneWayConfig{addr: addr, clients: udpOWClients, window: udpOWWindow, batch: udpOWBatch, size: udpDatagram,
		d: 300 * time.Millisecond, stall: udpOWStall, settle: udpOWSettle}
	res, err := udpOneWay(cfg, count.Load)
	if err != nil {
		t.Fatal(err)
	}
	if res.sent < 1000 || res.delivered != res.sent || res.lost != 0 || res.inWindow > res.delivered || res.lossPct() != 0 {
		t.Errorf("sink without loss: %+v", res)
	}
}

// A sink that never counts (a proxy that drops everything): the window is
// written off at every stall, so the sender goes on at a trickle, and the
// run ends on time with everything lost.
func TestUDPOneWayStalls(t *testing.T) {
	fd, err := udpBind(&unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd) // bound, never read: the kernel queues, then drops
	sa, _ := unix.Getsockname(fd)
	cfg := udpOneWayConfig{addr: loopAddr(sa.(*unix.SockaddrInet4).Port), clients: 2, window: 64, batch: 16, size: 64,
		d: 250 * time.Millisecond, stall: 20 * time.Millisecond, settle: 100 * time.Millisecond}
	t0 := time.Now()
	res, err := udpOneWay(cfg, func() uint64 { return 0 })
	if err == nil {
		t.Fatalf("nothing delivered, yet no error: %+v", res)
	}
	if took := time.Since(t0); took > cfg.d+cfg.settle+300*time.Millisecond {
		t.Errorf("run took %v", took)
	}
	// One window per stall, at most.
	if max := uint64(cfg.window) * uint64(cfg.d/cfg.stall+2); res.sent == 0 || res.sent > max || res.lost != res.sent {
		t.Errorf("sent %d (at most %d), lost %d", res.sent, max, res.lost)
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

type rrSummary struct{ sent, replies, inWindow, lost, stale, errors int }

func summaryOf(r udpRRResult) rrSummary {
	return rrSummary{r.sent, r.replies, r.inWindow, r.lost, r.stale, r.errors}
}
