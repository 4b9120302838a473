package handoff

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/flow"
)

// The flows socket: how the old process of an upgrade passes its
// established connections to the new one (flows.go). It is a unix
// SOCK_SEQPACKET pair: each message is one JSON object, a batch's
// descriptors travel with it (SCM_RIGHTS), and the boundaries the kernel
// keeps are the messages'. The new process's end travels in EnvFlows.
//
//	new -> old  hello  {"format":"l4lb-flows","version":1,"pid":P,"counts":true}, before READY
//	old -> new  batch  {"type":"batch","seq":N,"fds":K,"relays":[…],"queued":[…],"sessions":[…]} + K fds
//	new -> old  ack    {"type":"ack","seq":N,"refused":{"relays":[i…],"queued":[…],"sessions":[…]}}
//	old -> new  open   {"type":"open","open":C}: C client connections held (oldopen.go)
//	old -> new  done   {"type":"done","relays_total":R,"queued_total":Q,"sessions_total":S}, then
//	                   EOF, or with "counts" opens until it exits, then EOF
//
// "counts" (absent: false) says the new process reads "open" messages;
// the old process sends none to one that does not say so (an older build
// would take one for a protocol error), and a new process that gets none
// (an older build passing) counts nothing for it.

const flowsFormat = "l4lb-flows"

// flowsVersion is the version of the flows protocol this build speaks. A
// string so that a test build can claim another one (go build
// -ldflags=-X=github.com/l4lb/l4lb/pkg/handoff.flowsVersion=99).
var flowsVersion = "1"

// flowsVersionNumber is flowsVersion as a number (0 when a build set it to
// something that is not one: it then speaks with nobody).
func flowsVersionNumber() int {
	v, _ := strconv.Atoi(flowsVersion)
	return v
}

type flowsHello struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Counts  bool   `json:"counts,omitempty"` // it reads "open" messages
}

// flowsMessage is every message but the hello.
type flowsMessage struct {
	Type string `json:"type"` // "batch", "ack", "open", "done"
	Seq  int    `json:"seq,omitempty"`
	FDs  int    `json:"fds,omitempty"`
	*flow.Batch
	Refused *flow.Refused `json:"refused,omitempty"`
	// done: what was handed over in all.
	Relays   int `json:"relays_total,omitempty"`
	Queued   int `json:"queued_total,omitempty"`
	Sessions int `json:"sessions_total,omitempty"`
	// open: the client connections the old process holds.
	Open *int64 `json:"open,omitempty"`
}

// flowsBuffer bounds a message (flow.Batch's bounds keep batches under it).
const flowsBuffer = 1 << 20

// newFlowsPair is the flows socket: this process's end and the new
// process's (both close-on-exec; ForkExec's Files passes the new one's).
func newFlowsPair() (mine, theirs int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("flows socket: %w", err)
	}
	for _, fd := range fds {
		// As large as the kernel lets: a batch with held bytes is a few
		// hundred KiB. Privileged, past net.core.wmem_max.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		}
	}
	return fds[0], fds[1], nil
}

// flowsConn is one end of the flows socket.
type flowsConn struct {
	fd  int
	buf []byte
	oob []byte
	// maxMessage is the largest message the socket takes: its send buffer
	// as the kernel granted it, less what a datagram costs beside its
	// bytes (an unprivileged process gets twice net.core.wmem_max).
	maxMessage int
}

func newFlowsConn(fd int) *flowsConn {
	c := &flowsConn{fd: fd, buf: make([]byte, flowsBuffer), oob: make([]byte, unix.CmsgSpace(4*(flow.MaxFDs+8)))}
	c.maxMessage = flowsBuffer
	if sb, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
		c.maxMessage = min(c.maxMessage, sb-4096)
	}
	return c
}

// errTooLarge: a batch's message would not fit the socket.
var errTooLarge = errors.New("a flows message larger than the socket takes")

// encodeBatch is batch seq's message, or errTooLarge.
func (c *flowsConn) encodeBatch(seq int, b *flow.Batch) ([]byte, error) {
	data, err := json.Marshal(flowsMessage{Type: "batch", Seq: seq, FDs: len(b.FDs), Batch: b})
	if err == nil && len(data) > c.maxMessage {
		err = errTooLarge
	}
	return data, err
}

// sendData writes one message with fds, waiting for room in the socket
// no longer than ctx allows: a new process that stopped reading never
// holds this one up past a second stop signal.
func (c *flowsConn) sendData(ctx context.Context, data []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(c.fd, data, oob, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLOUT}}
			unix.Poll(pfd, 100)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			continue
		}
		return err
	}
}

func (c *flowsConn) close() { unix.Close(c.fd) }

// send writes one message with fds.
func (c *flowsConn) send(msg any, fds []int) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return c.sendData(context.Background(), data, fds)
}

// errFDsLost: the kernel dropped descriptors of a message (the receiver
// was out of fds, RLIMIT_NOFILE): which records they belonged to is
// unknown, so the whole batch is refused.
var errFDsLost = errors.New("descriptors of the message were lost (out of fds?)")

// recv reads one message: its bytes (valid until the next recv) and its
// descriptors (this process's, close-on-exec). io.EOF: the other end
// closed. flags are recvmsg's (unix.MSG_DONTWAIT to not wait).
func (c *flowsConn) recv(flags int) ([]byte, []int, error) {
	var n, oobn, rflags int
	var err error
	for {
		n, oobn, rflags, _, err = unix.Recvmsg(c.fd, c.buf, c.oob, flags|unix.MSG_CMSG_CLOEXEC)
		// ECONNRESET: the other end closed with messages of ours unread.
		// The kernel says so once, ahead of what it still has for us:
		// read on to those, and to the EOF after them.
		if err != unix.EINTR && err != unix.ECONNRESET {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	fds, ferr := parseRights(c.oob[:oobn])
	switch {
	case ferr != nil:
		closeFDs(fds)
		return nil, nil, ferr
	case rflags&unix.MSG_TRUNC != 0:
		closeFDs(fds)
		return nil, nil, fmt.Errorf("a flows message over %d bytes", len(c.buf))
	case rflags&unix.MSG_CTRUNC != 0:
		return c.buf[:n], fds, errFDsLost
	case n == 0 && len(fds) == 0:
		return nil, nil, io.EOF
	}
	return c.buf[:n], fds, nil
}

// parseRights returns the descriptors of the SCM_RIGHTS messages in oob.
// Each is this process's the moment recvmsg returns, so those of every
// whole message are returned even beside an error (control data cut
// short): the caller closes them, and none is left open unknown.
func parseRights(oob []byte) ([]int, error) {
	var fds []int
	for len(oob) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return fds, fmt.Errorf("flows message: control data: %w", err)
		}
		oob = rest
		if h.Level != unix.SOL_SOCKET || h.Type != unix.SCM_RIGHTS {
			continue
		}
		for len(data) >= 4 {
			fds = append(fds, int(int32(binary.NativeEndian.Uint32(data))))
			data = data[4:]
		}
	}
	return fds, nil
}

// readable waits up to ms milliseconds for a message (or the other end's
// close) on c.
func (c *flowsConn) readable(ms int) bool {
	pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, ms)
	return err == nil && n > 0
}

// resetFDs closes fds that are sockets with a reset (SO_LINGER 0: a cut
// stream must not look complete to its peer), others plainly.
func resetFDs(fds []int) {
	for _, fd := range fds {
		unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		unix.Close(fd)
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
