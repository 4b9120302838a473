package loop

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Datagrams the kernel drops because a socket's receive buffer is full
// never reach the loop, so no other drop reason sees them. With
// SO_RXQ_OVFL on, the kernel stamps each datagram it queues with the
// socket's drop count at that moment (sk_drops: a uint32 since the socket
// was opened), and hands it over as a control message, only once it is
// not zero: until a socket's first drop the option costs nothing but a
// flag test. Drops show when the next datagram after them is read; the
// count is the socket's own, so each socket of a listener (one per loop)
// and each session socket keeps its last-seen value.

// watchDrops turns SO_RXQ_OVFL on for fd.
func watchDrops(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
}

// socketDrops is fd's drop count now (SO_MEMINFO): the baseline of a
// socket taken with drops behind it (inherited from the process this one
// replaces, which counted those).
func socketDrops(fd int) (uint32, error) {
	var m [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(m))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&m[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return m[unix.SK_MEMINFO_DROPS], nil
}

// dropCount is a socket's drop count as last seen.
type dropCount uint32

// since takes count as seen and returns the drops since the last one.
// Counts are compared as serial numbers: the kernel's wraps at 2^32, and a
// datagram queued before the baseline was read carries a smaller count,
// which is no news.
func (d *dropCount) since(count uint32) int {
	delta := int32(count - uint32(*d))
	if delta <= 0 {
		return 0
	}
	*d = dropCount(count)
	return int(delta)
}

// rxqOverflow is the drop count the latest of entries [from, from+n) of a
// received batch carries. The counts grow in the order datagrams were
// queued, so the last entry with one has the highest; ok is false when
// none has one (no drop on the socket yet).
func rxqOverflow(b *mmsgBatch, from, n int) (count uint32, ok bool) {
	for i := from + n - 1; i >= from; i-- {
		clen := int(b.hdrs[i].Hdr.Controllen)
		if clen == 0 {
			continue // the common case: no drop yet, no packet info
		}
		if c, ok := ctlOverflow(b.ctls[i][:min(clen, ctlSpace)]); ok {
			return c, true
		}
	}
	return 0, false
}

// ctlOverflow finds the SO_RXQ_OVFL control message in ctl.
func ctlOverflow(ctl []byte) (uint32, bool) {
	for len(ctl) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(ctl) {
			return 0, false
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SO_RXQ_OVFL && int(h.Len) >= unix.CmsgLen(4) {
			return *(*uint32)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])), true
		}
		ctl = ctl[min(unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0)), len(ctl)):]
	}
	return 0, false
}

// countOverflow adds the drops entries [from, from+n) of a batch read
// from a socket reveal, against the socket's last-seen count d.
func (u *udpSock) countOverflow(d *dropCount, b *mmsgBatch, from, n int) {
	if c, ok := rxqOverflow(b, from, n); ok {
		if k := d.since(c); k > 0 {
			u.dropN(DropSocketBuffer, k)
		}
	}
}
