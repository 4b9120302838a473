package udpsession

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// A path MTU report (ICMP fragmentation needed) about one datagram a
// session sent is no failure of the session: the datagram is lost and
// counted, and the session stays with its backend.
func TestUDPPathMTUReportKeepsTheSession(t *testing.T) {
	raw, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		t.Skipf("no raw ICMP socket to report with: %v", err)
	}
	defer unix.Close(raw)
	// Own loopback addresses, so the path MTU the report leaves behind
	// (65535, no limit in practice) touches no other test's route.
	a := testnet.StartUDPBackend(t, "a", "127.0.0.2:0")
	b := testnet.StartUDPBackend(t, "b", "127.0.0.3:0")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{})
	c := r.client()
	first, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	var local, backend netip.AddrPort
	l := r.loops[0]
	r.on(l, func() {
		s := l.udps[0].sessions[client]
		if s == nil {
			return
		}
		local, _ = rawsys.Getsockname(s.fd)
		backend = s.backend.AddrPort
	})
	if !local.IsValid() {
		t.Fatal("no session for the client")
	}
	sendFragNeeded(t, raw, local, backend, 65535)
	testnet.Eventually(t, "the loop to take the report", func() bool {
		return r.front.Drops[DropBackendSend].Load()+r.front.Ended[EndError].Load() > 0
	})
	if n := r.front.Ended[EndError].Load(); n != 0 {
		t.Fatalf("the session ended (error) on a path MTU report")
	}
	got, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil || string(got) != string(first) {
		t.Fatalf("after the report: %q, %v; want the session's backend %q", got, err, first)
	}
	if n := r.front.Started.Load(); n != 1 {
		t.Errorf("%d sessions started, want the one", n)
	}
}

// sendFragNeeded sends, from raw, the ICMP "fragmentation needed" a router
// would send about a datagram from local to remote.
func sendFragNeeded(t *testing.T, raw int, local, remote netip.AddrPort, mtu uint16) {
	t.Helper()
	msg := make([]byte, 8+20+8)
	msg[0], msg[1] = 3, 4 // destination unreachable, fragmentation needed
	binary.BigEndian.PutUint16(msg[6:], mtu)
	ip := msg[8:28]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 1400)
	ip[6] = 0x40 // DF
	ip[8], ip[9] = 64, unix.IPPROTO_UDP
	l4, r4 := local.Addr().As4(), remote.Addr().As4()
	copy(ip[12:], l4[:])
	copy(ip[16:], r4[:])
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	udp := msg[28:]
	binary.BigEndian.PutUint16(udp[0:], local.Port())
	binary.BigEndian.PutUint16(udp[2:], remote.Port())
	binary.BigEndian.PutUint16(udp[4:], 1380)
	binary.BigEndian.PutUint16(msg[2:], inetChecksum(msg))
	if err := unix.Sendto(raw, msg, 0, &unix.SockaddrInet4{Addr: l4}); err != nil {
		t.Fatalf("sending the ICMP report: %v", err)
	}
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
