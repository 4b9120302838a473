package udpsession

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/pool"
)

// udpOut is a loop's batch of replies on their way to clients: backend
// datagrams are received straight into its slots, addressed to their
// client, and leave with one sendmmsg per listener socket when the batch
// is full and at the end of every turn.
type udpOut struct {
	b        *mmsgBatch
	n        int
	socks    [udpBatch]*udpSock
	backends [udpBatch]*pool.Backend
}

func newUDPOut() *udpOut { return &udpOut{b: newMmsgBatch()} }

func (o *udpOut) full() bool { return o.n >= udpBatch }

// add turns entry i, just received from s's backend, into a reply to s's
// client.
func (o *udpOut) add(i int, s *session) {
	b := o.b
	h := &b.hdrs[i].Hdr
	b.iovs[i].SetLen(int(b.hdrs[i].Len))
	b.names[i] = s.name
	h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	h.Namelen = s.nameLen
	if s.ctlLen > 0 {
		copy(b.ctls[i][:], s.ctl[:s.ctlLen])
		h.Control = &b.ctls[i][0]
		h.SetControllen(int(s.ctlLen))
	} else {
		h.Control = nil
		h.SetControllen(0)
	}
	o.socks[i], o.backends[i] = s.u, s.backend
	o.n = i + 1
}

// flushUDP sends the queued replies, one sendmmsg per run of entries that
// leave through the same listener socket. A reply the kernel will not take
// (the socket's send buffer full, a route gone) is dropped and counted:
// UDP has no retransmission to wait for.
func (l *Loop) flushUDP() {
	o := l.udpOut
	if o == nil || o.n == 0 {
		return
	}
	for i := 0; i < o.n; {
		u := o.socks[i]
		j := i + 1
		for j < o.n && o.socks[j] == u {
			j++
		}
		for i < j {
			sent, err := sendmmsg(u.fd, o.b, i, j-i)
			switch {
			case err == unix.EAGAIN || err == unix.ENOBUFS:
				u.dropN(DropClientSend, j-i) // full now: the rest of the run would fail too
				i = j
			case err != nil:
				u.dropN(DropClientSend, 1) // this one datagram (its route, its size)
				i++
			default:
				for k := i; k < i+sent; k++ {
					n := int64(o.b.hdrs[k].Len)
					u.dgToClient++
					u.bytesToClient += n
					o.backends[k].Meter.ToClient.Add(n)
				}
				i += sent
			}
		}
	}
	clear(o.socks[:o.n])
	clear(o.backends[:o.n])
	o.n = 0
}
