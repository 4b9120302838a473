package rawsys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The I/O calls on non-blocking sockets and pipes. The copies use recvfrom
// and sendto rather than read and write: those skip the file layer's
// checks and notifications (rw_verify_area, fsnotify) that read(2) and
// write(2) pass through, and MSG_NOSIGNAL spares the thread a SIGPIPE when
// the peer is gone (EPIPE says it as well).

// Recv reads into b from a socket with recvfrom and flags (0,
// MSG_PEEK|MSG_DONTWAIT...). 0 with no error is the peer's end.
func Recv(fd int, b []byte, flags int) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(flags), 0, 0)
		return r, e
	}))
}

// Send writes b to a socket with sendto and flags.
func Send(fd int, b []byte, flags int) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(flags), 0, 0)
		return r, e
	}))
}

// Write is write(2), for the few writes that are not a stream's (a PROXY
// header on a socket just connected).
func Write(fd int, b []byte) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		return r, e
	}))
}

// Splice moves up to max bytes from in to out, one of them a pipe,
// without blocking.
func Splice(in, out, max int) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(max), unix.SPLICE_F_NONBLOCK)
		return r, e
	}))
}

// Writev writes iovs as one write (one datagram on a UDP socket).
func Writev(fd int, iovs []unix.Iovec) error {
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iovs[0])), uintptr(len(iovs)))
		return r, e
	})
	return errOf(e)
}

// Sendmsg sends msg with flags.
func Sendmsg(fd int, msg *unix.Msghdr, flags int) error {
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(msg)), uintptr(flags))
		return r, e
	})
	return errOf(e)
}

// Recvmmsg receives up to len(hdrs) datagrams without waiting.
func Recvmmsg(fd int, hdrs []unix.Mmsghdr) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
		return r, e
	}))
}

// Sendmmsg sends hdrs' datagrams without waiting; it returns how many went.
func Sendmmsg(fd int, hdrs []unix.Mmsghdr) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
		return r, e
	}))
}
