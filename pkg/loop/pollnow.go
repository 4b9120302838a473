package loop

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// pollNow is epoll_wait with a zero timeout as a raw syscall: it cannot
// block, so it skips the runtime's syscall bookkeeping (notes: the loop
// polls without blocking while events keep coming).
func pollNow(epfd int, events []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
