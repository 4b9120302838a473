package udpsession

import (
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
)

// udpBatch is how many datagrams one recvmmsg or sendmmsg moves at most.
const udpBatch = 32

// udpSlot is the room for one datagram: the largest UDP payload fits
// (65,507 bytes over IPv4, 65,527 over IPv6), so nothing is ever
// truncated. Only the pages a datagram touches become resident, so a
// batch of small datagrams costs a page each, not 64 KiB.
const udpSlot = 1 << 16

// ctlSpace is room for the control messages of one received datagram: a
// drop count (SO_RXQ_OVFL, CmsgSpace 24) and a wildcard listener's packet
// info (IPV6_PKTINFO, CmsgSpace 40; IP_PKTINFO's is 32).
const ctlSpace = 64

// replyCtlSpace holds the one IP_PKTINFO or IPV6_PKTINFO control message
// a reply carries (CmsgSpace of the larger, IPv6 one).
const replyCtlSpace = 40

// sockName is room for an IPv4 or IPv6 socket address.
type sockName = unix.RawSockaddrInet6

// mmsgBatch is the memory of one batched receive or send: the headers the
// kernel reads and fills, and the datagrams, names and control messages
// they point to. Allocated once per loop; the pointers into it stay valid
// because Go's heap does not move.
type mmsgBatch struct {
	hdrs  [udpBatch]unix.Mmsghdr
	iovs  [udpBatch]unix.Iovec
	names [udpBatch]sockName
	ctls  [udpBatch][ctlSpace]byte
	data  []byte
}

func newMmsgBatch() *mmsgBatch {
	b := &mmsgBatch{data: make([]byte, udpBatch*udpSlot)}
	for i := range b.hdrs {
		b.iovs[i].Base = &b.data[i*udpSlot]
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.Iovlen = 1
	}
	return b
}

// slot is datagram i's room.
func (b *mmsgBatch) slot(i int) []byte { return b.data[i*udpSlot : (i+1)*udpSlot] }

// prepareRecv readies entries [from, from+n) for recvmmsg; withName and
// withCtl ask for the sender's address and the control messages.
func (b *mmsgBatch) prepareRecv(from, n int, withName, withCtl bool) {
	for i := from; i < from+n; i++ {
		h := &b.hdrs[i].Hdr
		b.iovs[i].SetLen(udpSlot)
		if withName {
			h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
			h.Namelen = unix.SizeofSockaddrInet6
		} else {
			h.Name, h.Namelen = nil, 0
		}
		if withCtl {
			h.Control = &b.ctls[i][0]
			h.SetControllen(ctlSpace)
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
		h.Flags = 0
		b.hdrs[i].Len = 0
	}
}

// recvmmsg receives up to n datagrams into entries [from, from+n).
func recvmmsg(fd int, b *mmsgBatch, from, n int) (int, error) {
	return rawsys.Recvmmsg(fd, b.hdrs[from:from+n])
}

// sendmmsg sends entries [from, from+n) on fd; it returns how many went.
func sendmmsg(fd int, b *mmsgBatch, from, n int) (int, error) {
	return rawsys.Sendmmsg(fd, b.hdrs[from:from+n])
}

// sendDatagram sends p on a connected UDP socket.
func sendDatagram(fd int, p []byte) error {
	_, err := rawsys.Send(fd, p, unix.MSG_DONTWAIT)
	return err
}

// nameAddrPort decodes a socket address the kernel wrote. A scoped
// (link-local) IPv6 address keeps its scope as the zone, the interface's
// index: the same address and port on two interfaces are two clients.
func nameAddrPort(n *sockName) netip.AddrPort {
	switch n.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(n))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), rawsys.Ntohs(p.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(n.Addr).Unmap()
		if n.Scope_id != 0 && a.Is6() {
			a = a.WithZone(strconv.FormatUint(uint64(n.Scope_id), 10))
		}
		return netip.AddrPortFrom(a, rawsys.Ntohs(n.Port))
	}
	return netip.AddrPort{}
}

// nameLen is the length of the socket address in n.
func nameLen(n *sockName) uint32 {
	if n.Family == unix.AF_INET {
		return unix.SizeofSockaddrInet4
	}
	return unix.SizeofSockaddrInet6
}

// replyCtl builds, from the control messages of a datagram a client sent
// to a wildcard socket, the control message that makes the reply leave
// from the address the client sent to (and, for IPv6, the interface it
// came in on, which link-local addresses need). dst is that address; ok
// is false when the datagram carried no packet info.
func replyCtl(ctl []byte, out *[replyCtlSpace]byte) (n int, dst netip.Addr, ok bool) {
	for {
		level, typ, data, rest, more := nextCmsg(ctl)
		if !more {
			return 0, netip.Addr{}, false
		}
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			in := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			n = buildCtl(out, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo)
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&out[unix.CmsgLen(0)]))
			pi.Spec_dst = in.Addr // the header's destination: where the client sent to
			return n, netip.AddrFrom4(in.Addr), true
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			in := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			n = buildCtl(out, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo)
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&out[unix.CmsgLen(0)]))
			pi.Addr, pi.Ifindex = in.Addr, in.Ifindex
			return n, netip.AddrFrom16(in.Addr), true
		}
		ctl = rest
	}
}

// nextCmsg splits the first control message off ctl: its level, type and
// data, and the messages after it; more is false at the end of ctl or at
// a malformed message.
func nextCmsg(ctl []byte) (level, typ int32, data, rest []byte, more bool) {
	if len(ctl) < unix.SizeofCmsghdr {
		return 0, 0, nil, nil, false
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(ctl) {
		return 0, 0, nil, nil, false
	}
	rest = ctl[min(unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0)), len(ctl)):]
	return h.Level, h.Type, ctl[unix.CmsgLen(0):h.Len], rest, true
}

// buildCtl writes an empty control message of the given kind into out and
// returns its space.
func buildCtl(out *[replyCtlSpace]byte, level, typ int32, size int) int {
	*out = [replyCtlSpace]byte{}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&out[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(size))
	return unix.CmsgSpace(size)
}

// sendDatagramAfter sends hdr and p as one datagram (writev on the
// connected socket): a PROXY header before the client's payload.
func sendDatagramAfter(fd int, hdr, p []byte) error {
	var iov [2]unix.Iovec
	iov[0].Base = &hdr[0]
	iov[0].SetLen(len(hdr))
	n := 1
	if len(p) > 0 {
		iov[1].Base = &p[0]
		iov[1].SetLen(len(p))
		n = 2
	}
	return rawsys.Writev(fd, iov[:n])
}
