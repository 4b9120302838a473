package main

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgBatch is a reusable vector for recvmmsg(2)/sendmmsg(2), which
// golang.org/x/sys has the types for but no wrappers: n buffers of size
// bytes, and with names a source/destination address per message.
type mmsgBatch struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet4
	bufs  [][]byte
	size  int
}

func newMmsgBatch(n, size int, names bool) *mmsgBatch {
	b := &mmsgBatch{hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, n), bufs: make([][]byte, n), size: size}
	if names {
		b.names = make([]unix.RawSockaddrInet4, n)
	}
	for i := range n {
		b.bufs[i] = make([]byte, size)
		b.iovs[i].Base = &b.bufs[i][0]
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.Iovlen = 1
	}
	b.reset(n)
	return b
}

// reset readies the first n messages to receive a full buffer each.
func (b *mmsgBatch) reset(n int) {
	for i := range n {
		b.iovs[i].SetLen(b.size)
		b.hdrs[i].Len = 0
		if b.names != nil {
			b.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
			b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		}
	}
}

// setLen sets the length of message i to send.
func (b *mmsgBatch) setLen(i, n int) { b.iovs[i].SetLen(n) }

// recv receives up to len(hdrs) datagrams into the batch. With a blocking
// socket and MSG_WAITFORONE it waits for the first one only. EINTR (Go's
// preemption signals) is retried.
func (b *mmsgBatch) recv(fd, flags int) (int, error) {
	b.reset(len(b.hdrs))
	for {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.hdrs[0])),
			uintptr(len(b.hdrs)), uintptr(flags), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	}
}

// send sends messages [from, to) of the batch with the lengths set by
// setLen (or received), to the names received (or the connected peer).
// It returns how many went out: a short count means the next one failed.
func (b *mmsgBatch) send(fd, from, to int) (int, error) {
	if from >= to {
		return 0, nil
	}
	for {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.hdrs[from])),
			uintptr(to-from), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	}
}

// msgLen is the length of message i as received.
func (b *mmsgBatch) msgLen(i int) int { return int(b.hdrs[i].Len) }

// isAgain reports a non-blocking socket with nothing to do, or a
// blocking one whose SO_RCVTIMEO passed.
func isAgain(err error) bool { return errors.Is(err, unix.EAGAIN) }
