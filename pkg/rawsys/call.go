package rawsys

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Retry makes call, one raw syscall, again while a signal interrupts it
// (EINTR): the one retry loop of the data path. The syscall is made inside
// call, so a pointer argument is converted to uintptr in the syscall's own
// argument list, the one place unsafe.Pointer's rules allow it (a stack
// object would otherwise be free to move before the kernel reads it).
func Retry(call func() (uintptr, unix.Errno)) (uintptr, unix.Errno) {
	for {
		r, e := call()
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
