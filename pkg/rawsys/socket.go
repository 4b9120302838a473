package rawsys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Close closes fd. Linux releases the descriptor even when close is
// interrupted, so it is never repeated.
func Close(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// ShutdownWrite sends fd's FIN.
func ShutdownWrite(fd int) {
	Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
		return r, e
	})
}

// Socket opens a socket.
func Socket(family, typ, proto int) (int, error) {
	r, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), uintptr(typ), uintptr(proto))
		return r, e
	})
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// Getsockopt reads an option of any size into p (*l bytes of room; the
// kernel sets *l to what it wrote).
func Getsockopt(fd, level, opt int, p unsafe.Pointer, l *uint32) error {
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(l)), 0)
		return r, e
	})
	return errOf(e)
}

// SetsockoptInt sets an int option.
func SetsockoptInt(fd, level, opt, v int) error {
	v32 := int32(v)
	return setsockopt(fd, level, opt, unsafe.Pointer(&v32), 4)
}

// setsockopt sets an option of n bytes at p.
func setsockopt(fd, level, opt int, p unsafe.Pointer, n uintptr) error {
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), n, 0)
		return r, e
	})
	return errOf(e)
}

// GetsockoptInt reads an int option.
func GetsockoptInt(fd, level, opt int) (int, error) {
	var v int32
	l := uint32(4)
	if err := Getsockopt(fd, level, opt, unsafe.Pointer(&v), &l); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SoError reads and clears a socket's pending error (the result of a
// non-blocking connect, a reset behind a FIN).
func SoError(fd int) error {
	v, err := GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if v != 0 {
		return unix.Errno(v)
	}
	return nil
}

// ResetClose closes fd with a reset (SO_LINGER 0): the peer learns the
// stream was cut, not that it ended.
func ResetClose(fd int) {
	l := unix.Linger{Onoff: 1, Linger: 0}
	setsockopt(fd, unix.SOL_SOCKET, unix.SO_LINGER, unsafe.Pointer(&l), unsafe.Sizeof(l))
	Close(fd)
}

// Unacked is how much of what was written to fd (its FIN included) its
// peer has not acknowledged (SIOCOUTQ); on error, 0.
func Unacked(fd int) int {
	var n int32
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCOUTQ, uintptr(unsafe.Pointer(&n)))
		return r, e
	})
	if e != 0 {
		return 0
	}
	return int(n)
}

// EpollCtl adds, changes or removes fd in the epoll set epfd.
func EpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
		return r, e
	})
	return errOf(e)
}
