package rawsys

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Call is unix.RawSyscall, repeated while a signal interrupts it (EINTR):
// the one retry loop of the data path.
func Call(trap, a1, a2, a3 uintptr) (uintptr, unix.Errno) {
	for {
		r, _, e := unix.RawSyscall(trap, a1, a2, a3)
		if e != unix.EINTR {
			return r, e
		}
	}
}

// Call6 is Call for six arguments.
func Call6(trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno) {
	for {
		r, _, e := unix.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
		if e != unix.EINTR {
			return r, e
		}
	}
}

// result is a call's count and its error (nil for errno 0), the shape of
// every wrapper here.
func result(r uintptr, e unix.Errno) (int, error) {
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// errOf is e as an error, nil for 0.
func errOf(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// ErrNoProgress: a write asked to move bytes moved none and reported no
// error. A non-blocking socket or pipe says EAGAIN when it is full, so
// this is a kernel (or accounting) surprise; it is an error so that the
// caller ends the stream instead of retrying forever.
var ErrNoProgress = errors.New("write made no progress")

// Progress is the zero-progress guard, around a write asked to move at
// least one byte that returned n and err: err as it is, or ErrNoProgress
// when nothing moved for no reason.
func Progress(n int, err error) (int, error) {
	if n == 0 && err == nil {
		return 0, ErrNoProgress
	}
	return n, err
}
