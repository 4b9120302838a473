package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// The udp scenario's load generator. Both modes run on one locked OS
// thread with raw non-blocking sockets (no netpoller in the client's path),
// are bounded in time whatever the proxy does, and count what is lost
// instead of waiting for it.

// udpRRConfig is one request/response run.
type udpRRConfig struct {
	addr    string
	sockets int // client sockets, each its own source port (a session)
	window  int // requests in flight at once, over all sockets
	size    int // datagram size (>= 8: the sequence number)
	d       time.Duration
	timeout time.Duration // a request unanswered this long is lost
}

// udpRRResult is what a request/response run saw.
type udpRRResult struct {
	sent, replies int
	// inWindow counts the replies received before d passed (the rate);
	// replies also counts those received while the last requests drain.
	inWindow int
	lost     int // requests unanswered after timeout
	stale    int // replies to a request already counted lost, or garbled
	errors   int // send and receive errors (ECONNREFUSED: nothing listens)
	latUS    []float64
	elapsed  time.Duration
}

// udpRRMaxSamples bounds the latency samples kept (8 MB).
const udpRRMaxSamples = 1 << 20

// udpRRScan is how often in-flight requests are checked for a timeout.
const udpRRScan = 10 * time.Millisecond

// idleRing is a FIFO of socket indexes waiting to send: a socket that got
// its reply goes to the back, so requests rotate over every source port.
type idleRing struct {
	buf        []int
	head, size int
}

func newIdleRing(n int) *idleRing { return &idleRing{buf: make([]int, n)} }

func (r *idleRing) push(i int) {
	r.buf[(r.head+r.size)%len(r.buf)] = i
	r.size++
}

func (r *idleRing) pop() int {
	i := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return i
}

// udpClientSockets opens n non-blocking UDP sockets connected to addr,
// each on its own ephemeral port.
func udpClientSockets(addr string, n int) ([]int, error) {
	sa, err := udpSockaddr(addr)
	if err != nil {
		return nil, err
	}
	fds := make([]int, 0, n)
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			if err = unix.Connect(fd, sa); err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("udp client socket: %w", err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// udpRequestReply sends cfg.window requests at a time over cfg.sockets
// sockets for cfg.d, then waits at most cfg.timeout for the last replies.
// Each request carries a sequence number; a reply counts only if it
// answers its socket's outstanding request.
func udpRequestReply(cfg udpRRConfig) (udpRRResult, error) {
	var res udpRRResult
	if cfg.size < 8 || cfg.sockets < 1 || cfg.window < 1 || cfg.window > cfg.sockets {
		return res, fmt.Errorf("udp rr: bad config %+v", cfg)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fds, err := udpClientSockets(cfg.addr, cfg.sockets)
	if err != nil {
		return res, err
	}
	defer closeAll(fds)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return res, err
	}
	defer unix.Close(ep)
	for i, fd := range fds {
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}); err != nil {
			return res, err
		}
	}

	var (
		outstanding = make([]uint64, len(fds)) // 0: idle
		sentAt      = make([]time.Time, len(fds))
		idle        = newIdleRing(len(fds))
		events      = make([]unix.EpollEvent, 128)
		req         = make([]byte, cfg.size)
		rep         = make([]byte, udpMaxDatagram)
		seq         uint64
		inflight    int
	)
	for i := range fds {
		idle.push(i)
	}
	res.latUS = make([]float64, 0, 1<<16)
	start := time.Now()
	end := start.Add(cfg.d)
	hardEnd := end.Add(cfg.timeout + time.Second)
	lastScan := start

	for {
		now := time.Now()
		if (!now.Before(end) && inflight == 0) || now.After(hardEnd) {
			break
		}
		// Refill the window; a failed send leaves the socket at the back
		// of the queue and the rest of the refill for the next turn.
		for inflight < cfg.window && idle.size > 0 && now.Before(end) {
			i := idle.pop()
			seq++
			binary.LittleEndian.PutUint64(req, seq)
			if err := retryEINTR(func() error { _, err := unix.Write(fds[i], req); return err }); err != nil {
				res.errors++
				idle.push(i)
				break
			}
			outstanding[i], sentAt[i] = seq, now
			inflight++
			res.sent++
		}
		wait := 5
		if inflight == 0 && now.Before(end) {
			wait = 1 // every send failed: try again soon, without spinning
		}
		n, err := unix.EpollWait(ep, events, wait)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return res, fmt.Errorf("epoll_wait: %w", err)
		}
		now = time.Now()
		for _, ev := range events[:max(n, 0)] {
			i := int(ev.Fd)
			for {
				m, err := unix.Read(fds[i], rep)
				if isAgain(err) {
					break
				}
				if err != nil {
					if errors.Is(err, unix.EINTR) {
						continue
					}
					res.errors++ // ECONNREFUSED: an ICMP error, reported once
					continue
				}
				if m < 8 || outstanding[i] == 0 || binary.LittleEndian.Uint64(rep) != outstanding[i] {
					res.stale++
					continue
				}
				if len(res.latUS) < udpRRMaxSamples {
					res.latUS = append(res.latUS, float64(now.Sub(sentAt[i]).Nanoseconds())/1e3)
				}
				res.replies++
				if now.Before(end) {
					res.inWindow++
				}
				outstanding[i] = 0
				inflight--
				idle.push(i)
			}
		}
		if now.Sub(lastScan) >= udpRRScan || !now.Before(end) {
			lastScan = now
			for i, s := range outstanding {
				if s != 0 && now.Sub(sentAt[i]) > cfg.timeout {
					outstanding[i] = 0
					inflight--
					res.lost++
					idle.push(i)
				}
			}
		}
	}
	res.lost += inflight // only past hardEnd
	res.elapsed = min(time.Since(start), cfg.d)
	if res.replies == 0 {
		return res, fmt.Errorf("no reply: %d requests sent, %d lost, %d errors", res.sent, res.lost, res.errors)
	}
	return res, nil
}

// udpOneWayConfig is one one-way run: clients send, the sink counts.
type udpOneWayConfig struct {
	addr    string
	clients int // sockets, each its own source port (a session)
	window  int // datagrams sent but not yet counted by the sink, at most
	batch   int // datagrams per sendmmsg
	size    int
	d       time.Duration
	// stall: with the window full and no progress this long, what is in
	// flight is written off as lost and sending goes on.
	stall time.Duration
	// settle bounds the wait for the last datagrams after d; the wait ends
	// sooner once the count held still for stall.
	settle time.Duration
}

// udpOneWayResult is what a one-way run saw.
type udpOneWayResult struct {
	sent      uint64
	delivered uint64 // counted by the sink, the late ones included
	inWindow  uint64 // counted by the sink before d passed (the rate)
	lost      uint64 // sent - delivered
	errors    int
	elapsed   time.Duration
}

// lossPct is the share of sent datagrams that never arrived, in %.
func (r udpOneWayResult) lossPct() float64 {
	if r.sent == 0 {
		return 0
	}
	return 100 * float64(r.lost) / float64(r.sent)
}

// udpOneWay sends from cfg.clients sockets in turn, a batch at a time, as
// long as fewer than cfg.window datagrams are unaccounted for: the sender
// goes as fast as the proxy relays, and the proxy's queue never overflows
// because the generator outran it. delivered reads the sink's count.
func udpOneWay(cfg udpOneWayConfig, delivered func() uint64) (udpOneWayResult, error) {
	var res udpOneWayResult
	if cfg.clients < 1 || cfg.batch < 1 || cfg.window < cfg.batch || cfg.size < 1 {
		return res, fmt.Errorf("udp one-way: bad config %+v", cfg)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fds, err := udpClientSockets(cfg.addr, cfg.clients)
	if err != nil {
		return res, err
	}
	defer closeAll(fds)
	b := newMmsgBatch(cfg.batch, cfg.size, false)
	for i := range cfg.batch {
		b.setLen(i, cfg.size)
	}
	base := delivered()
	var (
		writtenOff uint64
		seen       uint64
		next       int
		pause      = unix.Timespec{Nsec: 20_000}
	)
	start := time.Now()
	end := start.Add(cfg.d)
	lastProgress := start
	for now := start; now.Before(end); now = time.Now() {
		got := delivered() - base
		if got != seen {
			seen, lastProgress = got, now
		}
		inflight := int64(res.sent) - int64(got) - int64(writtenOff)
		if inflight+int64(cfg.batch) > int64(cfg.window) {
			if now.Sub(lastProgress) > cfg.stall {
				writtenOff += uint64(inflight)
				lastProgress = now
				continue
			}
			_ = unix.Nanosleep(&pause, nil) // the sink may share this CPU
			continue
		}
		fd := fds[next%len(fds)]
		next++
		k, err := b.send(fd, 0, cfg.batch)
		if err != nil {
			res.errors++ // ECONNREFUSED after an ICMP error, or EAGAIN
			_ = unix.Nanosleep(&pause, nil)
			continue
		}
		res.sent += uint64(k)
	}
	res.inWindow = delivered() - base
	res.elapsed = time.Since(start)
	// Let the last datagrams arrive: until the count holds still for as
	// long as a stall (a proxy kept off its CPU that long is not done), or
	// settle passed.
	last, still := res.inWindow, time.Now()
	for deadline := time.Now().Add(cfg.settle); time.Now().Before(deadline) && time.Since(still) < cfg.stall; {
		time.Sleep(5 * time.Millisecond)
		if c := delivered() - base; c != last {
			last, still = c, time.Now()
		}
	}
	res.delivered = delivered() - base
	if res.delivered < res.sent {
		res.lost = res.sent - res.delivered
	}
	if res.sent == 0 {
		return res, fmt.Errorf("nothing sent (%d errors)", res.errors)
	}
	if res.delivered == 0 {
		return res, fmt.Errorf("nothing delivered: %d sent", res.sent)
	}
	return res, nil
}
