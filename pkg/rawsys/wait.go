package rawsys

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The reactor's waits. The blocking ones are not repeated on EINTR: the
// runtime interrupts raw waits (sysmon's time slices, each garbage
// collection's stops) to have the goroutine yield, and the reactor keeps
// its limits as times across the interruptions (pkg/reactor, poller.go).

// EpollWait is epoll_wait without the runtime's syscall hand-off: the
// calling goroutine keeps its P while the thread sleeps in the kernel.
//
//go:noinline
func EpollWait(epfd int, events []unix.EpollEvent, timeoutMs int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(timeoutMs), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// EpollPoll is a non-blocking epoll_wait (timeout 0), made again when a
// signal interrupts it: a poll has no limit to keep.
func EpollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	return result(Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd),
			uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
		return r, e
	}))
}

// Nanosleep sleeps d without the runtime's syscall bookkeeping, keeping
// the P; a signal ends it early with EINTR.
//
//go:noinline
func Nanosleep(d time.Duration) unix.Errno {
	ts := unix.NsecToTimespec(int64(d))
	_, _, e := unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
	return e
}

// MaxWaitMs caps epoll_wait's timeout, as the Go runtime's netpoller caps
// its own (1e9 ms, about 11.5 days). The kernel reads the timeout as a C
// int: a timer more than 2^31-1 ms (24.8 days) away would otherwise reach
// it as a negative number, "wait forever", and never fire. A loop that
// wakes at the cap finds nothing due and waits again.
const MaxWaitMs = 1_000_000_000

// WaitTimeout is epoll_wait's timeout, in milliseconds rounded up, for a
// timer due in wait nanoseconds.
func WaitTimeout(wait int64) int {
	if wait >= MaxWaitMs*int64(time.Millisecond) {
		return MaxWaitMs // and no overflow rounding up a wait near MaxInt64
	}
	return int(max(0, (wait+int64(time.Millisecond)-1)/int64(time.Millisecond)))
}
