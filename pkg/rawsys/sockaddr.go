package rawsys

import (
	"fmt"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sockaddr is an IPv4 or IPv6 socket address in the kernel's layout.
type Sockaddr struct {
	sa unix.RawSockaddrInet6 // large enough for either family
	n  uint32
}

// SockaddrOf is ap (unmapped) in the kernel's layout, with its family.
// ap's zone is not in it: SetZone puts it there.
func SockaddrOf(ap netip.AddrPort) (int, Sockaddr) {
	var r Sockaddr
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

// SetZone puts ap's IPv6 zone into sa as the interface index a link-local
// address needs (connect(2) refuses one without it: EINVAL). A numeric
// zone is the index itself, as the net package reads it; a name is looked
// up on fd (one ioctl, for zoned addresses only), so an interface that was
// re-created is found under its new index.
func SetZone(fd int, ap netip.AddrPort, sa *Sockaddr) error {
	z := ap.Addr().Zone()
	if z == "" || sa.sa.Family != unix.AF_INET6 {
		return nil
	}
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		sa.sa.Scope_id = uint32(n)
		return nil
	}
	ifr, err := unix.NewIfreq(z)
	if err != nil {
		return fmt.Errorf("zone %q: %w", z, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("zone %q: %w", z, err)
	}
	sa.sa.Scope_id = ifr.Uint32()
	return nil
}

// Connect connects a non-blocking socket. A TCP connect interrupted by a
// signal goes on in the background like one that said EINPROGRESS (and
// calling again would only say EALREADY), so EINTR is reported as that,
// not retried.
func Connect(fd int, sa *Sockaddr) error {
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa.sa)), uintptr(sa.n))
	switch e {
	case 0:
		return nil
	case unix.EINTR:
		return unix.EINPROGRESS
	}
	return e
}

// Accept4 accepts one connection, non-blocking and close-on-exec, and
// returns its peer's address.
func Accept4(fd int) (int, netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	r, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(&rsa)),
			uintptr(unsafe.Pointer(&l)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		return r, e
	})
	if e != 0 {
		return -1, netip.AddrPort{}, e
	}
	return int(r), AddrPortOf(&rsa), nil
}

// Getsockname returns a socket's local address.
func Getsockname(fd int) (netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	_, e := Retry(func() (uintptr, unix.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
		return r, e
	})
	if e != 0 {
		return netip.AddrPort{}, e
	}
	return AddrPortOf(&rsa), nil
}

// AddrPortOf decodes a socket address the kernel wrote (IPv4-mapped IPv6
// addresses unmapped; no zone).
func AddrPortOf(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), Ntohs(p.Port))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		a := netip.AddrFrom16(p.Addr).Unmap()
		return netip.AddrPortFrom(a, Ntohs(p.Port))
	}
	return netip.AddrPort{}
}

// Ntohs reads a port the kernel stored in network order.
func Ntohs(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}
