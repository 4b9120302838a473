package loop

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The socket calls a loop makes for every connection, as raw syscalls:
// none of them can block (the sockets are non-blocking, and a close never
// lingers: SO_LINGER is only ever set to 0), so they need none of the
// runtime's syscall bookkeeping, which a loop holding its P would pay
// about ten times per connection (holdp.go). Raw calls also skip
// x/sys/unix's allocations (a Sockaddr per connect).

func closeFd(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

func shutdownWrite(fd int) {
	unix.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
}

func newSocket(family, typ, proto int) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), uintptr(typ), uintptr(proto))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func setsockoptInt(fd, level, opt, v int) error {
	v32 := int32(v)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v32)), 4, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockoptInt(fd, level, opt int) (int, error) {
	var v int32
	l := uint32(4)
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return int(v), nil
}

func epollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd),
		uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawSockaddr is an IPv4 or IPv6 socket address in the kernel's layout.
type rawSockaddr struct {
	sa unix.RawSockaddrInet6 // large enough for either family
	n  uint32
}

// socketAddress is ap (unmapped) in the kernel's layout, with its family.
func socketAddress(ap netip.AddrPort) (int, rawSockaddr) {
	var r rawSockaddr
	port := ap.Port()
	be := (*[2]byte)(unsafe.Pointer(&r.sa.Port)) // same offset in both layouts
	be[0], be[1] = byte(port>>8), byte(port)
	a := ap.Addr().Unmap()
	if a.Is4() {
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.sa))
		p.Family = unix.AF_INET
		p.Addr = a.As4()
		r.n = unix.SizeofSockaddrInet4
		return unix.AF_INET, r
	}
	r.sa.Family = unix.AF_INET6
	r.sa.Addr = a.As16()
	r.n = unix.SizeofSockaddrInet6
	return unix.AF_INET6, r
}

// connectRaw connects a non-blocking socket. A TCP connect interrupted by
// a signal goes on in the background like one that said EINPROGRESS (and
// calling again would only say EALREADY), so EINTR is reported as that.
func connectRaw(fd int, sa *rawSockaddr) error {
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa.sa)), uintptr(sa.n))
	switch e {
	case 0:
		return nil
	case unix.EINTR:
		return unix.EINPROGRESS
	}
	return e
}
