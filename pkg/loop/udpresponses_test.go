package loop

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// rmemAlloc is the memory a socket's received datagrams hold (SO_MEMINFO):
// it grows with every datagram queued.
func rmemAlloc(fd int) (uint32, error) {
	var m [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(m))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&m[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return m[unix.SK_MEMINFO_RMEM_ALLOC], nil
}

// sendQueued sends p from conn to to, and waits until fd (the receiving
// socket) has it queued.
func sendQueued(conn *net.UDPConn, to *net.UDPAddr, fd int, p []byte) error {
	before, err := rmemAlloc(fd)
	if err != nil {
		return err
	}
	if _, err := conn.WriteToUDP(p, to); err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if now, err := rmemAlloc(fd); err != nil || now > before {
			return err
		}
	}
	return errors.New("the datagram never reached the socket")
}

// A backend that sends more than `responses` replies: those past the
// limit that arrive in the same batch as the last one owed are not
// relayed, and each is counted as a dropped datagram (excess_reply).
func TestUDPRepliesPastResponsesAreCountedAsDropped(t *testing.T) {
	be, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	r := newUDPRig(t, []string{be.LocalAddr().String()}, udpRigOpts{
		settings: func(s *UDPSettings) { s.Responses = 1 }})
	c := r.client()
	if _, err := c.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	be.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, from, err := be.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	l := r.loops[0]
	var sendErr error
	r.on(l, func() {
		s := l.udps[0].sessions[client]
		if s == nil {
			sendErr = errors.New("no session for the client")
			return
		}
		// Three replies, all queued before the loop reads any: one
		// recvmmsg takes them together.
		for _, p := range []string{"r1", "r2", "r3"} {
			if sendErr = sendQueued(be, from, s.fd, []byte(p)); sendErr != nil {
				return
			}
		}
	})
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "r1" {
		t.Fatalf("reply %q, %v; want r1", buf[:n], err)
	}
	testnet.Eventually(t, "the session to end after its one response", func() bool {
		return r.front.Ended[EndResponses].Load() == 1
	})
	// The drops are counted in the same read that ended the session.
	if got := r.front.Drops[DropExcessReply].Load(); got != 2 {
		t.Errorf("%d replies counted dropped as %s, want the 2 past responses = 1", got, DropExcessReply)
	}
	testnet.Eventually(t, "the relayed reply to be counted", func() bool { return r.front.DatagramsToClient.Load() == 1 })
}

// nameOf is the socket address the kernel writes for an IPv4 client.
func nameOf(ap netip.AddrPort) sockName {
	var n sockName
	p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&n))
	p.Family = unix.AF_INET
	p.Port = ntohs(ap.Port()) // its own inverse
	p.Addr = ap.Addr().As4()
	return n
}

// A refusal read while an earlier one of the same readReplies call waits
// (behind the datagrams queued ahead of it) is about the same backend:
// the session moves on once, and the next backend is not blamed for the
// first backend's refusal.
//
// The second refusal must land between two recvmmsg calls of one
// readReplies: a window of microseconds no test can aim for. So the
// state the first call leaves (s.refused set) is made by hand, and the
// second refusal is the kernel's own, pending on the socket.
func TestUDPSecondRefusalInOneReadBlamesTheFirstBackend(t *testing.T) {
	live := testnet.StartUDPBackend(t, "live", "")
	r := newUDPRig(t, []string{refusingAddr(t), live.Addr}, udpRigOpts{retries: 1})
	c := r.client()
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	name := nameOf(client)
	l := r.loops[0]
	var setupErr error
	r.on(l, func() {
		u := l.udps[0]
		u.datagram([]byte("q"), &name, nil) // round robin: the refusing backend first
		s := u.sessions[client]
		if s == nil || s.dial == nil || s.backend != r.pool.Backends()[0] {
			setupErr = errors.New("the first session is not dialing the refusing backend")
			return
		}
		// Its refusal (ICMP port unreachable) is pending on the socket.
		fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
		for deadline := time.Now().Add(20 * time.Second); ; {
			if n, err := unix.Poll(fds, 0); err == nil && n == 1 && fds[0].Revents&unix.POLLERR != 0 {
				break
			}
			if time.Now().After(deadline) {
				setupErr = errors.New("no refusal reported on the session's socket")
				return
			}
			time.Sleep(time.Millisecond)
		}
		s.refused = unix.ECONNREFUSED // read earlier in this call, acted on at its end
		s.readReplies()
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	if _, failed := r.pool.Backends()[1].Dials(pool.DialClient); failed != 0 {
		t.Errorf("the live backend was blamed for %d failed dials: the refusals were the first backend's", failed)
	}
	if _, failed := r.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
		t.Errorf("the refusing backend has %d failed dials, want 1", failed)
	}
	if n := r.front.Ended[EndRefused].Load() + r.front.Ended[EndError].Load(); n != 0 {
		t.Errorf("%d sessions ended refused or in error; the session belongs on the live backend", n)
	}
	if n := r.front.Drops[DropRefused].Load(); n != 0 {
		t.Errorf("%d datagrams dropped as refused", n)
	}
	if t.Failed() {
		return
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "q" {
		t.Fatalf("reply %q, %v: the first datagram must reach the live backend and its reply the client", buf[:n], err)
	}
}

// A burst to a session whose backend has gone: the first datagram draws
// the refusal (on loopback, before its send returns), and the send of the
// next one reports it. A batch send (sendmmsg) that sent only the first
// would swallow that refusal, and the rest of the burst would go to the
// dead port after it; instead the session ends (refused) and the datagram
// being sent gets one more try on a new session, on the other backend.
func TestUDPRefusalDuringABurstSendIsNotLost(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{})
	c := r.client()
	got, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	map[string]*testnet.UDPBackend{"a": a, "b": b}[string(got)].Close() // the session's backend goes away
	l := r.loops[0]
	var sendErr error
	r.on(l, func() {
		// A burst of unequal sizes (no GSO), queued before the loop reads
		// it: one recvmmsg takes both.
		u := l.udps[0]
		for _, p := range []string{"x", "yy"} {
			before, err := rmemAlloc(u.fd)
			if err != nil {
				sendErr = err
				return
			}
			if _, err := c.Write([]byte(p)); err != nil {
				sendErr = err
				return
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
				if now, err := rmemAlloc(u.fd); err != nil || now > before {
					sendErr = err
					break
				}
				if time.Now().After(deadline) {
					sendErr = errors.New("the client's datagram never reached the listener")
					return
				}
			}
		}
	})
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "yy" {
		t.Fatalf("reply %q, %v: the datagram whose send found the refusal must get its retry on the live backend; drops: refused %d, backend_send %d",
			buf[:n], err, r.front.Drops[DropRefused].Load(), r.front.Drops[DropBackendSend].Load())
	}
	if n := r.front.Ended[EndRefused].Load(); n != 1 {
		t.Errorf("%d sessions ended refused, want the one on the closed backend", n)
	}
	if n := r.front.Drops[DropRefused].Load(); n != 1 {
		t.Errorf("%d datagrams dropped as refused, want the one the refusal was about", n)
	}
}
