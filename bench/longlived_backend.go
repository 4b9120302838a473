package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// runLonglivedBackendRole is the longlived scenario's echo server
// (`-role llbackend -listen IP:PORT`): one epoll loop on a locked thread,
// no goroutine or buffer per connection, so one process holds 16,000
// connections in a few MB. It writes back what it reads; a write the
// socket cannot take whole keeps the rest until EPOLLOUT.
func runLonglivedBackendRole(args []string) error {
	fs := flag.NewFlagSet("llbackend", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to listen on (an address of the scenario's network)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(*listen)
	if err != nil {
		return err
	}
	if !llNet.Contains(ap.Addr()) {
		return fmt.Errorf("llbackend: %s is outside the scenario's network %s", ap, llNet)
	}
	runtime.LockOSThread()
	lfd, err := llListen(ap)
	if err != nil {
		return err
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}); err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, readyLine)
	pending := map[int][]byte{} // unsent echo bytes, rare
	buf := make([]byte, 64<<10)
	events := make([]unix.EpollEvent, 512)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == lfd {
				llAcceptAll(ep, lfd)
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 && !llFlush(ep, fd, pending) {
				continue
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				llEcho(ep, fd, buf, pending)
			}
		}
	}
}

// llListen opens a non-blocking listening socket on ap with the largest
// backlog the namespace's somaxconn allows.
func llListen(ap netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind %s: %w", ap, err)
	}
	if err := unix.Listen(fd, 65535); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func llAcceptAll(ep, lfd int) {
	for {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN, or EMFILE: keep serving what is held
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		if unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}) != nil {
			unix.Close(fd)
		}
	}
}

// llEcho reads what fd has and writes it back; EOF or an error closes it.
func llEcho(ep, fd int, buf []byte, pending map[int][]byte) {
	if _, busy := pending[fd]; busy {
		return // EPOLLOUT first; the kernel keeps the rest queued
	}
	n, err := unix.Read(fd, buf)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return
	}
	if n <= 0 {
		llDrop(ep, fd, pending)
		return
	}
	w, err := unix.Write(fd, buf[:n])
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		llDrop(ep, fd, pending)
		return
	}
	w = max(w, 0)
	if w < n {
		pending[fd] = append([]byte(nil), buf[w:n]...)
		_ = unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLRDHUP, Fd: int32(fd)})
	}
}

// llFlush writes fd's pending bytes; false when fd was dropped.
func llFlush(ep, fd int, pending map[int][]byte) bool {
	p := pending[fd]
	w, err := unix.Write(fd, p)
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		llDrop(ep, fd, pending)
		return false
	}
	if w = max(w, 0); w < len(p) {
		pending[fd] = p[w:]
		return true
	}
	delete(pending, fd)
	_ = unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)})
	return true
}

func llDrop(ep, fd int, pending map[int][]byte) {
	delete(pending, fd)
	_ = unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, fd, nil)
	unix.Close(fd)
}
