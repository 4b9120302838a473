package main

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// synWatch timestamps every TCP SYN sent to one port on the loopback
// interface, through a packet socket. A killed backend's port is closed, so
// the dials a proxy keeps making to it leave no other trace: this is how
// the failover scenario sees when a proxy stops dialing it. It needs
// CAP_NET_RAW (the harness is root).
type synWatch struct {
	fd   int // owned by read, which closes it
	port uint16
	stop atomic.Bool
	mu   sync.Mutex
	syns []time.Time
	done chan struct{}
}

func newSYNWatch(port int) (*synWatch, error) {
	// SOCK_DGRAM: the kernel strips the link-layer header, we read IP.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	lo, err := loopbackIndex()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Filter in the kernel, so the harness does not wake for every packet
	// of the load it is measuring, then bind.
	prog := synFilter(uint16(port))
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("attach SYN filter: %w", err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: lo}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind packet socket to lo: %w", err)
	}
	// Wake the reader now and then so close is noticed.
	tv := unix.Timeval{Usec: 100_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("packet socket timeout: %w", err)
	}
	w := &synWatch{fd: fd, port: uint16(port), done: make(chan struct{})}
	go w.read()
	return w, nil
}

func (w *synWatch) read() {
	defer close(w.done)
	// The reader closes the fd itself: closing it from another goroutine
	// while recvfrom may be called again would read whatever socket
	// reuses the number.
	defer unix.Close(w.fd)
	buf := make([]byte, 128)
	for !w.stop.Load() {
		n, from, err := unix.Recvfrom(w.fd, buf, unix.MSG_TRUNC)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		// Loopback shows each packet twice: sent and received. Count the
		// received copy only.
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_HOST {
			continue
		}
		if isSYNTo(buf[:min(n, len(buf))], w.port) {
			w.mu.Lock()
			w.syns = append(w.syns, time.Now())
			w.mu.Unlock()
		}
	}
}

// isSYNTo reports whether an IPv4 packet is a TCP SYN (not SYN-ACK) to port.
func isSYNTo(p []byte, port uint16) bool {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_TCP {
		return false
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+14 {
		return false
	}
	tcp := p[ihl:]
	const syn, ack = 0x02, 0x10
	return binary.BigEndian.Uint16(tcp[2:4]) == port && tcp[13]&(syn|ack) == syn
}

// between returns the SYN times in [from, to).
func (w *synWatch) between(from, to time.Time) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Time
	for _, t := range w.syns {
		if !t.Before(from) && t.Before(to) {
			out = append(out, t)
		}
	}
	return out
}

func (w *synWatch) close() {
	w.stop.Store(true)
	<-w.done
}

// dialsStop is how long after start the dials stopped: the time of the last
// SYN before the first quiet gap of at least gap (periodic health checks
// leave such gaps; client traffic does not). It is end-start when dials
// never stopped.
func dialsStop(syns []time.Time, start, end time.Time, gap time.Duration) time.Duration {
	last := start
	for _, t := range syns {
		if t.Sub(last) >= gap {
			return last.Sub(start)
		}
		last = t
	}
	if end.Sub(last) >= gap {
		return last.Sub(start)
	}
	return end.Sub(start)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// synFilter is a classic BPF program accepting only what isSYNTo accepts,
// and only the received copy of a loopback packet: IPv4, not a fragment,
// TCP to port, SYN set and ACK clear.
func synFilter(port uint16) []unix.SockFilter {
	const drop = 13
	ins := bpfIns
	jump := func(i int, code uint16, k uint32, toDropIfTrue bool) unix.SockFilter {
		f := unix.SockFilter{Code: code, K: k}
		if toDropIfTrue {
			f.Jt = uint8(drop - (i + 1))
		} else {
			f.Jf = uint8(drop - (i + 1))
		}
		return f
	}
	return []unix.SockFilter{
		0:  ins(bpfLdAbsB, bpfPktType),
		1:  jump(1, bpfJeq, unix.PACKET_HOST, false),
		2:  ins(bpfLdAbsB, 9), // IP protocol
		3:  jump(3, bpfJeq, unix.IPPROTO_TCP, false),
		4:  ins(bpfLdAbsH, 6), // flags and fragment offset
		5:  jump(5, bpfJset, 0x1fff, true),
		6:  ins(bpfLdxMsh, 0), // X = IP header length
		7:  ins(bpfLdIndH, 2), // TCP destination port
		8:  jump(8, bpfJeq, uint32(port), false),
		9:  ins(bpfLdIndB, 13), // TCP flags
		10: ins(bpfAnd, 0x12),  // SYN | ACK
		11: jump(11, bpfJeq, 0x02, false),
		12: ins(bpfRet, 256),
		13: ins(bpfRet, 0),
	}
}

func loopbackIndex() (int, error) {
	ifs, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(ifs)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(ifs, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("index of lo: %w", err)
	}
	return int(ifr.Uint32()), nil
}
