package udpsession

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
)

// A client's burst of equal-sized datagrams goes to its backend as one
// UDP GSO send (UDP_SEGMENT): the kernel builds one large packet and cuts
// it into the same datagrams as late as it can (on the wire, or at the
// receiving socket on loopback), so the burst crosses the stack once
// instead of once per datagram. The backend receives exactly the datagrams
// the client sent.

// maxGSOSegments is what every kernel with UDP_SEGMENT accepts in one send.
const maxGSOSegments = 64

// gsoCtl is a control message carrying UDP_SEGMENT.
type gsoCtl [unix.SizeofCmsghdr + 8]byte // CmsgSpace(2)

// sendGSO sends iovs as datagrams of size bytes each (the last may be
// shorter) with one sendmsg on fd. unsupported says the kernel or the
// route cannot segment these (a datagram larger than the path's MTU, an
// old kernel): the caller sends them one by one, and stops trying GSO
// on that socket.
func sendGSO(fd int, iovs []unix.Iovec, size int) (err error, unsupported bool) {
	var ctl gsoCtl
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])) = uint16(size)
	msg := unix.Msghdr{Iov: &iovs[0], Control: &ctl[0]}
	msg.SetIovlen(len(iovs))
	msg.SetControllen(unix.CmsgSpace(2))
	err = rawsys.Sendmsg(fd, &msg, unix.MSG_DONTWAIT)
	return err, err == unix.EINVAL || err == unix.EIO || err == unix.ENOPROTOOPT || err == unix.EOPNOTSUPP
}

// gsoRun reports the segment size when datagrams [from, to) of the batch
// can go as one GSO send: at least two, equal sizes but for a shorter
// last one, few enough for one send.
func gsoRun(in *mmsgBatch, from, to int) (int, bool) {
	n := to - from
	if n < 2 || n > maxGSOSegments {
		return 0, false
	}
	size := int(in.hdrs[from].Len)
	if size == 0 || size*n > 65000 {
		return 0, false
	}
	for i := from + 1; i < to-1; i++ {
		if int(in.hdrs[i].Len) != size {
			return 0, false
		}
	}
	if last := int(in.hdrs[to-1].Len); last == 0 || last > size {
		return 0, false
	}
	return size, true
}
