package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The UDP backends of the udp scenario: an echo that sends every datagram
// back to where it came from, and a sink that only counts. Both run on a
// blocking socket on a locked OS thread and move datagrams in batches
// (recvmmsg/sendmmsg), so the backends' share of the load generator's CPU
// stays small next to the proxy's.

const (
	udpBackendBatch = 64
	udpMaxDatagram  = 65536
	// udpBackendRcvbuf asks for a deep receive queue (capped by
	// net.core.rmem_max): a backend that drops would be counted as the
	// proxy's loss.
	udpBackendRcvbuf = 4 << 20
	// udpPollTimeout wakes a blocked backend to see whether it should stop.
	udpPollTimeoutUS = 100_000
)

// udpListen binds a blocking UDP socket on a checked loopback address.
func udpListen(addr string) (int, error) {
	sa, err := udpSockaddr(addr)
	if err != nil {
		return -1, err
	}
	return udpBind(sa)
}

// udpBind binds a blocking UDP socket with the backends' options: deep
// queues, and a receive timeout so a server can see it should stop.
func udpBind(sa *unix.SockaddrInet4) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, udpBackendRcvbuf)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, udpBackendRcvbuf)
	tv := unix.NsecToTimeval(udpPollTimeoutUS * 1000)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind udp 127.0.0.1:%d: %w", sa.Port, err)
	}
	return fd, nil
}

// udpSockaddr parses a checked loopback address.
func udpSockaddr(addr string) (*unix.SockaddrInet4, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, nil
}

// stopped reports whether done is closed (never, for a nil done).
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// serveUDPEcho sends every datagram on fd back to its source until done
// is closed (nil: forever). It owns fd's reads and writes.
func serveUDPEcho(fd int, done <-chan struct{}) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := newMmsgBatch(udpBackendBatch, udpMaxDatagram, true)
	for !stopped(done) {
		n, err := b.recv(fd, unix.MSG_WAITFORONE)
		if isAgain(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("udp echo: recvmmsg: %w", err)
		}
		for i := range n {
			b.setLen(i, b.msgLen(i))
		}
		for sent := 0; sent < n; {
			k, err := b.send(fd, sent, n)
			if err != nil || k == 0 {
				k = 1 // that datagram cannot go back (its sender is gone): skip it
			}
			sent += k
		}
	}
	return nil
}

// serveUDPSink counts the datagrams arriving on fd into count until done
// is closed (nil: forever).
func serveUDPSink(fd int, count *atomic.Uint64, done <-chan struct{}) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := newMmsgBatch(udpBackendBatch, udpMaxDatagram, false)
	for !stopped(done) {
		n, err := b.recv(fd, unix.MSG_WAITFORONE)
		if isAgain(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("udp sink: recvmmsg: %w", err)
		}
		count.Add(uint64(n))
	}
	return nil
}

// udpCounter is the sink's datagram count, shared between the backend
// process (which adds) and the harness (which reads) through a file both
// map: the one-way load generator reads it for every batch it sends, so
// it must cost no syscall.
type udpCounter struct {
	mem []byte
	n   *atomic.Uint64
}

// udpCounterSize is one page, what mmap hands out anyway.
const udpCounterSize = 4096

// createUDPCounter makes a zeroed counter file at path and maps it.
func createUDPCounter(path string) (*udpCounter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(udpCounterSize); err != nil {
		return nil, err
	}
	return mapUDPCounter(f)
}

// openUDPCounter maps an existing counter file (the backend's side).
func openUDPCounter(path string) (*udpCounter, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mapUDPCounter(f)
}

func mapUDPCounter(f *os.File) (*udpCounter, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 8 {
		return nil, errors.New("udp counter file too short")
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, udpCounterSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	// The mapping is page-aligned, so the word is 8-byte aligned.
	return &udpCounter{mem: mem, n: (*atomic.Uint64)(unsafe.Pointer(&mem[0]))}, nil
}

func (c *udpCounter) load() uint64 { return c.n.Load() }

func (c *udpCounter) close() error {
	if c == nil || c.mem == nil {
		return nil
	}
	c.n = nil
	err := unix.Munmap(c.mem)
	c.mem = nil
	return err
}

// udpDrops sums the kernel's drop counters (receive queue full) of the UDP
// sockets bound to port, from /proc/net/udp: it tells a datagram lost in
// front of a socket (the proxy's listener, the sink) from one lost inside
// the proxy.
func udpDrops(port int) uint64 {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return 0
	}
	return parseUDPDrops(b, port)
}

// parseUDPDrops reads /proc/net/udp: "sl local_address rem_address st ...
// drops", addresses as HEXIP:HEXPORT, drops the last field.
func parseUDPDrops(b []byte, port int) uint64 {
	want := fmt.Sprintf(":%04X", port)
	var n uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || !strings.HasSuffix(f[1], want) {
			continue
		}
		if v, err := strconv.ParseUint(f[len(f)-1], 10, 64); err == nil {
			n += v
		}
	}
	return n
}
