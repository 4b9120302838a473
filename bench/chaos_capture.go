package main

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpFlags of interest.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// ctlPacket is one TCP packet with SYN, FIN or RST set, seen on lo, with
// the kernel's receive time.
type ctlPacket struct {
	T     int64 // unix ns (kernel timestamp)
	Sport uint16
	Dport uint16
	Flags uint8
}

// ctlCapture records every TCP SYN, FIN and RST on the loopback interface
// of the namespace the chaos run lives in: it is how the analysis tells
// whether a backend (or its kernel, once killed) sent the FIN a client saw,
// or whether it came from l4lb. Only the received copy of each loopback
// packet is kept, and the filter runs in the kernel (classic BPF).
type ctlCapture struct {
	fd   int // owned by read, which closes it
	stop atomic.Bool
	mu   sync.Mutex
	pkts []ctlPacket
	done chan struct{}
	// drops is what the kernel reports it could not queue for us.
	drops, seen uint32
}

func newCtlCapture() (*ctlCapture, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	fail := func(what string, err error) (*ctlCapture, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	lo, err := loopbackIndex()
	if err != nil {
		return fail("lo", err)
	}
	prog := ctlFilter()
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		return fail("attach filter", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: lo}); err != nil {
		return fail("bind to lo", err)
	}
	tv := unix.Timeval{Usec: 100_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("timeout", err)
	}
	c := &ctlCapture{fd: fd, done: make(chan struct{})}
	go c.read()
	return c, nil
}

func (c *ctlCapture) read() {
	defer close(c.done)
	defer unix.Close(c.fd)
	buf := make([]byte, 128)
	oob := make([]byte, 128)
	for !c.stop.Load() {
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_HOST {
			continue
		}
		p, ok := parseCtlPacket(buf[:min(n, len(buf))])
		if !ok {
			continue
		}
		p.T = time.Now().UnixNano()
		if ts, ok := cmsgTimestamp(oob[:oobn]); ok {
			p.T = ts
		}
		c.mu.Lock()
		c.pkts = append(c.pkts, p)
		c.mu.Unlock()
	}
	if st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		c.drops, c.seen = st.Drops, st.Packets
	}
}

func cmsgTimestamp(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano(), true
		}
	}
	return 0, false
}

// parseCtlPacket reads an IPv4 TCP header.
func parseCtlPacket(p []byte) (ctlPacket, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_TCP {
		return ctlPacket{}, false
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+14 {
		return ctlPacket{}, false
	}
	tcp := p[ihl:]
	return ctlPacket{Sport: binary.BigEndian.Uint16(tcp[0:2]), Dport: binary.BigEndian.Uint16(tcp[2:4]), Flags: tcp[13]}, true
}

// close stops the reader and returns every packet, in time order.
func (c *ctlCapture) close() []ctlPacket {
	c.stop.Store(true)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	sort.SliceStable(c.pkts, func(i, j int) bool { return c.pkts[i].T < c.pkts[j].T })
	return c.pkts
}

// ctlFilter accepts the received copy of IPv4 TCP packets, not fragments,
// with SYN, FIN or RST set.
func ctlFilter() []unix.SockFilter {
	const drop = 10
	ins := bpfIns
	// jt/jf are relative to the next instruction.
	toDrop := func(i int) uint8 { return uint8(drop - (i + 1)) }
	return []unix.SockFilter{
		0:  ins(bpfLdAbsB, bpfPktType),
		1:  {Code: bpfJeq, K: unix.PACKET_HOST, Jf: toDrop(1)},
		2:  ins(bpfLdAbsB, 9), // IP protocol
		3:  {Code: bpfJeq, K: unix.IPPROTO_TCP, Jf: toDrop(3)},
		4:  ins(bpfLdAbsH, 6), // flags and fragment offset
		5:  {Code: bpfJset, K: 0x1fff, Jt: toDrop(5)},
		6:  ins(bpfLdxMsh, 0),  // X = IP header length
		7:  ins(bpfLdIndB, 13), // TCP flags
		8:  {Code: bpfJset, K: tcpFIN | tcpSYN | tcpRST, Jf: toDrop(8)},
		9:  ins(bpfRet, 128),
		10: ins(bpfRet, 0),
	}
}

// packetIndex answers "what did port A send to port B, and when".
type packetIndex struct {
	byPair map[[2]uint16][]ctlPacket // (sport, dport) -> packets in time order
}

func newPacketIndex(pkts []ctlPacket) *packetIndex {
	x := &packetIndex{byPair: map[[2]uint16][]ctlPacket{}}
	for _, p := range pkts {
		k := [2]uint16{p.Sport, p.Dport}
		x.byPair[k] = append(x.byPair[k], p)
	}
	return x
}

// streamStart is the time of the last SYN from sport to dport at or
// before t (0 if none was seen).
func (x *packetIndex) streamStart(sport, dport uint16, t int64) int64 {
	var last int64
	for _, p := range x.byPair[[2]uint16{sport, dport}] {
		if p.T > t {
			break
		}
		if p.Flags&(tcpSYN|tcpACK) == tcpSYN {
			last = p.T
		}
	}
	return last
}

// firstEnd is the first FIN or RST sport sent to dport in [from, to]:
// "fin", "rst" or "none", and its time.
func (x *packetIndex) firstEnd(sport, dport uint16, from, to int64) (string, int64) {
	for _, p := range x.byPair[[2]uint16{sport, dport}] {
		if p.T < from {
			continue
		}
		if p.T > to {
			break
		}
		switch {
		case p.Flags&tcpRST != 0:
			return "rst", p.T
		case p.Flags&tcpFIN != 0:
			return "fin", p.T
		}
	}
	return "none", 0
}
