package udpsession

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func ovfl(count uint32) []byte {
	return cmsg(nil, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, binary.NativeEndian.AppendUint32(nil, count))
}

// The largest set of control messages a listener datagram gets fits its
// room: a drop count beside IPv6 packet info.
func TestUDPCtlSpaceHoldsADropCountAndPacketInfo(t *testing.T) {
	if need := unix.CmsgSpace(4) + unix.CmsgSpace(unix.SizeofInet6Pktinfo); need > ctlSpace {
		t.Fatalf("ctlSpace %d, a drop count and IPv6 packet info need %d", ctlSpace, need)
	}
}

// The drop count is found beside packet info, in either order, and a
// malformed or missing one reads as none.
func TestUDPCtlOverflowFindsTheDropCount(t *testing.T) {
	var pi unix.Inet6Pktinfo
	pktinfo := cmsg(nil, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, (*[unix.SizeofInet6Pktinfo]byte)(unsafe.Pointer(&pi))[:])
	for name, tc := range map[string]struct {
		ctl  []byte
		want uint32
		ok   bool
	}{
		"alone":              {ovfl(7), 7, true},
		"before packet info": {append(ovfl(9), pktinfo...), 9, true},
		"after packet info":  {append(append([]byte(nil), pktinfo...), ovfl(11)...), 11, true},
		"packet info only":   {pktinfo, 0, false},
		"none":               {nil, 0, false},
		"truncated":          {ovfl(5)[:unix.CmsgLen(2)], 0, false},
	} {
		got, ok := ctlOverflow(tc.ctl)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", name, got, ok, tc.want, tc.ok)
		}
	}
	// The packet info is still found behind a drop count.
	var out [replyCtlSpace]byte
	if _, _, ok := replyCtl(append(ovfl(3), pktinfo...), &out); !ok {
		t.Error("packet info behind a drop count not found")
	}
}

// A batch's count is its last datagram's (the latest, and any datagram
// after a drop has one); entries outside the range read are not looked
// at.
func TestUDPRxqOverflowTakesTheLastCount(t *testing.T) {
	b := newMmsgBatch()
	set := func(i int, ctl []byte) {
		copy(b.ctls[i][:], ctl)
		b.hdrs[i].Hdr.SetControllen(len(ctl))
	}
	if _, ok := rxqOverflow(b, 0, udpBatch); ok {
		t.Fatal("a count in a batch without control messages")
	}
	set(3, ovfl(6))
	set(5, ovfl(100))
	if c, ok := rxqOverflow(b, 0, 4); c != 6 || !ok {
		t.Errorf("entries 0..3: %d, %v; want 6", c, ok)
	}
	if c, ok := rxqOverflow(b, 3, 3); c != 100 || !ok {
		t.Errorf("entries 3..5: %d, %v; want 100", c, ok)
	}
	if _, ok := rxqOverflow(b, 0, 0); ok {
		t.Error("a count in an empty batch")
	}
	if allocs := testing.AllocsPerRun(100, func() { rxqOverflow(b, 0, udpBatch) }); allocs != 0 {
		t.Errorf("%v allocations per batch", allocs)
	}
}

// Drops since the last count: each count once; one from before the
// baseline (a datagram queued before an inherited socket was taken) is
// no news; the kernel's count wraps.
func TestUDPDropCountSince(t *testing.T) {
	d := dropCount(10)
	for _, step := range []struct {
		count uint32
		want  int
	}{{8, 0}, {10, 0}, {13, 3}, {13, 0}, {12, 0}, {20, 7}} {
		if got := d.since(step.count); got != step.want {
			t.Errorf("count %d: %d new drops, want %d", step.count, got, step.want)
		}
	}
	w := dropCount(1<<32 - 2)
	if got := w.since(3); got != 5 || w != 3 {
		t.Errorf("across the wrap: %d new drops, want 5 (seen %d)", got, w)
	}
}

// On a real socket: datagrams the full buffer dropped show on the next
// one read, as many as the socket's own count (SO_MEMINFO) says.
func TestUDPSocketDropsReachTheNextDatagram(t *testing.T) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	raw, err := rx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	raw.Control(func(f uintptr) { fd = int(f) })
	if err := watchDrops(fd); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096); err != nil {
		t.Fatal(err)
	}
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	p := make([]byte, 1000)
	var dropped uint32
	for deadline := time.Now().Add(20 * time.Second); dropped == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the full buffer never dropped a datagram")
		}
		tx.Write(p)
		if dropped, err = socketDrops(fd); err != nil {
			t.Fatal(err)
		}
	}
	b := newMmsgBatch()
	var seen dropCount
	got := 0
	for deadline := time.Now().Add(20 * time.Second); uint32(got) != dropped; {
		if time.Now().After(deadline) {
			t.Fatalf("%d drops seen, the socket counts %d", got, dropped)
		}
		b.prepareRecv(0, udpBatch, true, true)
		n, err := recvmmsg(fd, b, 0, udpBatch)
		if err == unix.EAGAIN {
			tx.Write(p) // drained: the next datagram brings the count
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := rxqOverflow(b, 0, n); ok {
			got += seen.since(c)
		}
		if dropped, err = socketDrops(fd); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkUDPRxqOverflow: what finding a full batch's drop count costs
// the loop, before any drop (no control message) and after (one on each
// datagram, beside packet info).
func BenchmarkUDPRxqOverflow(b *testing.B) {
	var pi unix.Inet6Pktinfo
	pktinfo := cmsg(nil, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, (*[unix.SizeofInet6Pktinfo]byte)(unsafe.Pointer(&pi))[:])
	for _, tc := range []struct {
		name string
		ctl  []byte
	}{{"none", nil}, {"pktinfo", pktinfo}, {"drops", append(ovfl(7), pktinfo...)}} {
		b.Run(tc.name, func(b *testing.B) {
			batch := newMmsgBatch()
			for i := range udpBatch {
				copy(batch.ctls[i][:], tc.ctl)
				batch.hdrs[i].Hdr.SetControllen(len(tc.ctl))
			}
			b.ReportAllocs()
			for b.Loop() {
				rxqOverflow(batch, 0, udpBatch)
			}
		})
	}
}
