package udpsession

import (
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
)

// cmsg appends one control message to b.
func cmsg(b []byte, level, typ int32, data []byte) []byte {
	m := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&m[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(m[unix.CmsgLen(0):], data)
	return append(b, m...)
}

func TestReplyCtlFromPacketInfo(t *testing.T) {
	var pi4 unix.Inet4Pktinfo
	pi4.Ifindex = 7
	pi4.Spec_dst = [4]byte{10, 0, 0, 1} // the route's choice; the reply uses the address sent to
	pi4.Addr = [4]byte{127, 0, 0, 2}
	in4 := (*[unix.SizeofInet4Pktinfo]byte)(unsafe.Pointer(&pi4))[:]

	var pi6 unix.Inet6Pktinfo
	pi6.Addr = netip.MustParseAddr("fe80::1").As16()
	pi6.Ifindex = 3
	in6 := (*[unix.SizeofInet6Pktinfo]byte)(unsafe.Pointer(&pi6))[:]

	other := cmsg(nil, unix.SOL_SOCKET, unix.SO_TIMESTAMP, make([]byte, 16)) // skipped

	t.Run("ipv4", func(t *testing.T) {
		var out [replyCtlSpace]byte
		n, dst, ok := replyCtl(cmsg(other, unix.IPPROTO_IP, unix.IP_PKTINFO, in4), &out)
		if !ok || dst != netip.MustParseAddr("127.0.0.2") || n != unix.CmsgSpace(unix.SizeofInet4Pktinfo) {
			t.Fatalf("replyCtl = %d, %v, %v", n, dst, ok)
		}
		h := (*unix.Cmsghdr)(unsafe.Pointer(&out[0]))
		got := (*unix.Inet4Pktinfo)(unsafe.Pointer(&out[unix.CmsgLen(0)]))
		if h.Level != unix.IPPROTO_IP || h.Type != unix.IP_PKTINFO || h.Len != uint64(unix.CmsgLen(unix.SizeofInet4Pktinfo)) {
			t.Fatalf("header %+v", *h)
		}
		if got.Spec_dst != pi4.Addr || got.Ifindex != 0 || got.Addr != [4]byte{} {
			t.Fatalf("reply pktinfo %+v: want the source set to the address sent to, any interface", *got)
		}
	})
	t.Run("ipv6", func(t *testing.T) {
		var out [replyCtlSpace]byte
		for i := range out {
			out[i] = 0xff // a reused buffer: every byte of the message is written
		}
		n, dst, ok := replyCtl(cmsg(other, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, in6), &out)
		if !ok || dst != netip.MustParseAddr("fe80::1") || n != unix.CmsgSpace(unix.SizeofInet6Pktinfo) || n > replyCtlSpace {
			t.Fatalf("replyCtl = %d, %v, %v", n, dst, ok)
		}
		got := (*unix.Inet6Pktinfo)(unsafe.Pointer(&out[unix.CmsgLen(0)]))
		if got.Addr != pi6.Addr || got.Ifindex != 3 {
			t.Fatalf("reply pktinfo %+v", *got)
		}
		for i := unix.CmsgLen(unix.SizeofInet6Pktinfo); i < n; i++ {
			if out[i] != 0 {
				t.Fatalf("padding byte %d is %#x", i, out[i])
			}
		}
	})
	t.Run("none or malformed", func(t *testing.T) {
		var out [replyCtlSpace]byte
		bad := cmsg(nil, unix.IPPROTO_IP, unix.IP_PKTINFO, in4)
		(*unix.Cmsghdr)(unsafe.Pointer(&bad[0])).SetLen(len(bad) + 1) // longer than the buffer
		short := cmsg(nil, unix.IPPROTO_IP, unix.IP_PKTINFO, in4[:4])
		for name, ctl := range map[string][]byte{"empty": nil, "other only": other, "overlong": bad, "short": short, "truncated header": other[:8]} {
			if _, _, ok := replyCtl(ctl, &out); ok {
				t.Errorf("%s: packet info found", name)
			}
		}
	})
}

func TestNameAddrPortAndLen(t *testing.T) {
	var n4 sockName
	sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&n4))
	sa4.Family = unix.AF_INET
	sa4.Addr = [4]byte{127, 0, 0, 9}
	sa4.Port = rawsys.Ntohs(5353) // network order (ntohs is its own inverse)
	if got := nameAddrPort(&n4); got != netip.MustParseAddrPort("127.0.0.9:5353") || nameLen(&n4) != unix.SizeofSockaddrInet4 {
		t.Fatalf("ipv4: %v, len %d", got, nameLen(&n4))
	}
	var n6 sockName
	n6.Family = unix.AF_INET6
	n6.Addr = netip.MustParseAddr("::ffff:10.1.2.3").As16()
	n6.Port = rawsys.Ntohs(53)
	if got := nameAddrPort(&n6); got != netip.MustParseAddrPort("10.1.2.3:53") || nameLen(&n6) != unix.SizeofSockaddrInet6 {
		t.Fatalf("mapped ipv6: %v, len %d (a client is one key whichever way it is written)", got, nameLen(&n6))
	}
}
