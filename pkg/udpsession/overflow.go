package udpsession

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/rawsys"
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

// A session's socket gets the option only once replies queue up on it: a
// read takes more than one (or all the room it had). The setsockopt would
// otherwise cost every session, and a request/response session (DNS), its
// reply read alone, cannot have dropped: a drop needs the buffer full,
// more than one datagram queued (the buffer holds two of the largest),
// and the next read takes those together. Nothing is lost by waiting: the
// kernel counts drops with the option off too, and the count read when it
// is turned on covers them.

// watchDrops turns SO_RXQ_OVFL on for fd.
func watchDrops(fd int) error {
	return rawsys.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
}

// socketDrops is fd's drop count now (SO_MEMINFO): the baseline of a
// socket taken with drops behind it (inherited from the process this one
// replaces, which counted those).
func socketDrops(fd int) (uint32, error) {
	var m [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(m))
	if err := rawsys.Getsockopt(fd, unix.SOL_SOCKET, unix.SO_MEMINFO, unsafe.Pointer(&m[0]), &l); err != nil {
		return 0, err
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
// received batch carries: the counts grow in the order the datagrams were
// queued, and once a socket has dropped one every later datagram carries
// one, so the batch's last datagram has the highest count, or none has
// any (ok false: no drop on the socket yet). One entry is looked at, not
// the batch.
func rxqOverflow(b *mmsgBatch, from, n int) (count uint32, ok bool) {
	if n <= 0 {
		return 0, false
	}
	i := from + n - 1
	clen := int(b.hdrs[i].Hdr.Controllen)
	if clen == 0 {
		return 0, false // the common case: no drop yet, no packet info
	}
	return ctlOverflow(b.ctls[i][:min(clen, ctlSpace)])
}

// ctlOverflow finds the SO_RXQ_OVFL control message in ctl.
func ctlOverflow(ctl []byte) (uint32, bool) {
	for {
		level, typ, data, rest, more := nextCmsg(ctl)
		if !more {
			return 0, false
		}
		if level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(data) >= 4 {
			return *(*uint32)(unsafe.Pointer(&data[0])), true
		}
		ctl = rest
	}
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

// watchReplies turns drop counts on for s's socket, replies having queued
// up on it, and counts the drops it already had.
func (s *session) watchReplies() {
	s.watched = true // once: a socket that refuses the option is not asked again
	if watchDrops(s.fd) != nil {
		return
	}
	// Datagrams queued before the option carry no count, and those queued
	// since carry one no higher than this: since skips them.
	if c, err := socketDrops(s.fd); err == nil {
		if k := s.drops.since(c); k > 0 {
			s.u.dropN(DropSocketBuffer, k)
		}
	}
}
