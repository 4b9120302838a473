package main

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// The longlived client's connection life and phases (longlived_client.go
// holds the process, its commands and replies).

const llScanEvery = int64(100 * time.Millisecond)

func (c *llClient) track(fd, i int) {
	for fd >= len(c.byFD) {
		c.byFD = append(c.byFD, -1)
	}
	c.byFD[fd] = int32(i)
}

// dial starts connection i's connect; a failure at once schedules a retry.
func (c *llClient) dial(i int) {
	cn := &c.conns[i]
	c.attempts++
	cn.tries++
	g := c.first + i
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.retryLater(i)
		return
	}
	// The port is chosen at connect, per destination: each source address
	// then has the whole range toward every target.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	src := c.sources[g%len(c.sources)]
	if err := unix.Bind(fd, &src); err != nil {
		unix.Close(fd)
		c.retryLater(i)
		return
	}
	dst := c.targets[g%len(c.targets)]
	if err := unix.Connect(fd, &dst); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		c.retryLater(i)
		return
	}
	if err := unix.EpollCtl(c.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		c.retryLater(i)
		return
	}
	cn.fd, cn.state, cn.nextTry = fd, llDialing, c.now()
	c.track(fd, i)
	c.dialing++
}

// retryLater gives connection i another try after a back-off, or gives
// up on it: in a storm the first retry is at once, then 100 ms doubling
// to 2 s with jitter, at most llStormTries tries; while opening,
// llOpenTries tries 200 ms apart; otherwise a closed connection stays
// broken.
func (c *llClient) retryLater(i int) {
	cn := &c.conns[i]
	now := c.now()
	switch {
	case c.phase == "storm" && now < c.until && cn.tries < llStormTries:
		wait := int64(0)
		if cn.tries > 0 {
			wait = min(int64(100*time.Millisecond)<<(cn.tries-1), int64(2*time.Second))
			wait = wait/2 + c.rng.Int64N(wait)
		}
		if cn.tries == 0 || !cn.dropped {
			wait = 0
		}
		cn.state, cn.nextTry = llWaiting, now+wait
		c.retry = append(c.retry, i)
	case c.phase == "open" && now < c.until && cn.tries < llOpenTries:
		cn.state, cn.nextTry = llWaiting, now+int64(200*time.Millisecond)
		c.retry = append(c.retry, i)
	case c.phase == "storm" || c.phase == "open":
		cn.state = llFailed
	default:
		cn.state = llBroken
	}
}

// drop closes connection i (EOF, reset, error or timeout) and decides
// what comes next.
func (c *llClient) drop(i int) {
	cn := &c.conns[i]
	if cn.fd >= 0 {
		_ = unix.EpollCtl(c.ep, unix.EPOLL_CTL_DEL, cn.fd, nil)
		unix.Close(cn.fd)
		c.byFD[cn.fd] = -1
		cn.fd = -1
	}
	if cn.state == llDialing {
		c.dialing--
	}
	if cn.sentAt != 0 {
		cn.sentAt = 0
		c.awaiting--
		if cn.state == llHeld {
			c.lost++
		}
	}
	if c.phase == "storm" && !cn.dropped {
		cn.dropped, cn.tries = true, 0
	}
	c.retryLater(i)
}

func (c *llClient) send(i int) bool {
	cn := &c.conns[i]
	n, err := unix.Write(cn.fd, c.msg[:])
	if err != nil || n != llMsgSize {
		c.drop(i)
		return false
	}
	cn.sentAt, cn.got = c.now(), 0
	c.awaiting++
	return true
}

func (c *llClient) onEvent(fd int, ev uint32) {
	if fd >= len(c.byFD) || c.byFD[fd] < 0 {
		return
	}
	i := int(c.byFD[fd])
	cn := &c.conns[i]
	if cn.state == llDialing {
		soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil || soerr != 0 || ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			c.drop(i)
			return
		}
		c.dialing--
		cn.state = llVerifying
		if unix.EpollCtl(c.ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}) != nil {
			c.drop(i)
			return
		}
		c.send(i)
		return
	}
	n, err := unix.Read(fd, c.buf)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if n <= 0 {
		c.drop(i)
		return
	}
	if cn.sentAt == 0 {
		return // bytes nobody asked for: ignored
	}
	cn.got += n
	if cn.got < llMsgSize {
		return
	}
	rtt := c.now() - cn.sentAt
	cn.sentAt = 0
	c.awaiting--
	if cn.state == llVerifying {
		cn.state, cn.tries = llHeld, 0
		if cn.dropped {
			cn.servedAt = c.now()
		}
		return
	}
	c.echoed++
	if c.hist != nil {
		c.hist.add(rtt / int64(time.Microsecond))
	}
}

// scan times out dials, verifications and messages (every llScanEvery).
func (c *llClient) scan(now int64) {
	if now-c.lastScan < llScanEvery {
		return
	}
	c.lastScan = now
	for i := range c.conns {
		cn := &c.conns[i]
		switch {
		case cn.state == llDialing && now-cn.nextTry > int64(llEchoTimeout):
			c.drop(i)
		case cn.sentAt != 0 && now-cn.sentAt > int64(llEchoTimeout):
			// A lost message or verification: the connection is as good
			// as gone.
			c.drop(i)
		}
	}
}

// redial starts the retries that are due, at most budget of them.
func (c *llClient) redial(now int64, budget int) {
	keep := c.retry[:0]
	for _, i := range c.retry {
		cn := &c.conns[i]
		if cn.state != llWaiting {
			continue
		}
		if budget > 0 && cn.nextTry <= now {
			budget--
			c.dial(i)
			continue
		}
		keep = append(keep, i)
	}
	c.retry = keep
}

func (c *llClient) tick() {
	now := c.now()
	c.scan(now)
	switch c.phase {
	case "open":
		c.tickOpen(now)
	case "msgs":
		c.tickMsgs(now)
	case "check":
		c.tickCheck(now)
	case "storm":
		c.tickStorm(now)
	}
}

func (c *llClient) count(state uint8) int {
	n := 0
	for i := range c.conns {
		if c.conns[i].state == state {
			n++
		}
	}
	return n
}

func (c *llClient) tickOpen(now int64) {
	c.redial(now, c.inflight-c.dialing)
	for c.cursor < len(c.conns) && c.dialing < c.inflight {
		c.dial(c.cursor)
		c.cursor++
	}
	if now > c.until {
		for i := range c.conns {
			if s := c.conns[i].state; s != llHeld && s != llFailed {
				c.drop(i)
				c.conns[i].state = llFailed
			}
		}
	}
	if c.cursor < len(c.conns) || c.dialing > 0 || len(c.retry) > 0 || c.count(llVerifying) > 0 {
		return
	}
	c.reply(llReply{Held: c.count(llHeld), Failed: c.count(llFailed), Attempts: c.attempts})
}

// tickMsgs sends the messages due: connection k of the rotation at
// phaseT0 + k*period/len, so the aggregate rate is len/period.
func (c *llClient) tickMsgs(now int64) {
	if now < c.until {
		due := int((now - c.phaseT0) * int64(len(c.conns)) / c.period)
		for ; c.cursor < due; c.cursor++ {
			i := c.cursor % len(c.conns)
			if cn := &c.conns[i]; cn.state == llHeld && cn.sentAt == 0 {
				if c.send(i) {
					c.sent++
				}
			}
		}
		return
	}
	if c.awaiting > 0 && now < c.until+int64(llEchoTimeout) {
		return
	}
	lost := c.lost + uint64(c.awaiting)
	c.reply(llReply{Held: c.count(llHeld), Sent: c.sent, Echoed: c.echoed, Lost: lost, Hist: c.hist})
	c.hist = nil
}

// tickCheck sends one message on every held connection at c.rate per
// second; broken is every connection that is not held or lost its echo.
func (c *llClient) tickCheck(now int64) {
	due := min(len(c.conns), int(float64(now-c.phaseT0)*c.rate/1e9)+1)
	for ; c.cursor < due; c.cursor++ {
		if cn := &c.conns[c.cursor]; cn.state == llHeld && cn.sentAt == 0 {
			if c.send(c.cursor) {
				c.sent++
			}
		}
	}
	if c.cursor < len(c.conns) || (c.awaiting > 0 && now < c.until) {
		return
	}
	ok := int(c.echoed)
	c.reply(llReply{Held: c.count(llHeld), Sent: c.sent, Echoed: c.echoed, Broken: len(c.conns) - ok, Hist: c.hist})
	c.hist = nil
}

// tickStorm redials what closed; it is over once every connection was
// dropped and is served again or given up on, or at the deadline.
func (c *llClient) tickStorm(now int64) {
	c.redial(now, len(c.retry))
	served, failed, notDropped := 0, 0, 0
	var last int64
	pending := false
	for i := range c.conns {
		cn := &c.conns[i]
		switch {
		case !cn.dropped:
			notDropped++
		case cn.state == llHeld && cn.servedAt > 0:
			served++
			last = max(last, cn.servedAt)
		case cn.state == llFailed:
			failed++
		default:
			pending = true
		}
	}
	if now < c.until && (pending || notDropped > 0) {
		return
	}
	if now >= c.until {
		failed += c.count(llWaiting) + c.count(llDialing) + c.count(llVerifying)
	}
	lastWall := int64(0)
	if last > 0 {
		lastWall = c.start.Add(time.Duration(last)).UnixNano()
	}
	c.reply(llReply{Held: c.count(llHeld), Served: served, Failed: failed, NotDrop: notDropped,
		Attempts: c.attempts, LastNS: lastWall})
}
