package splice

import (
	"net"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkSmallCopySyscalls measures one 64-byte send and its receive
// over loopback TCP, through writeFd/readFd (sendto/recvfrom) and through
// plain write/read, the calls they replaced: the difference is what the
// file layer adds to every small copy the loops make.
func BenchmarkSmallCopySyscalls(b *testing.B) {
	b.Run("sendto-recvfrom", func(b *testing.B) {
		from, to := loopbackPair(b)
		buf := make([]byte, 64)
		for b.Loop() {
			if _, err := writeFd(from, buf); err != nil {
				b.Fatal(err)
			}
			if _, err := readFd(to, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write-read", func(b *testing.B) {
		from, to := loopbackPair(b)
		buf := make([]byte, 64)
		p := uintptr(unsafe.Pointer(&buf[0]))
		for b.Loop() {
			if _, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(from), p, 64); e != 0 {
				b.Fatal(e)
			}
			if _, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(to), p, 64); e != 0 {
				b.Fatal(e)
			}
		}
	})
}

// loopbackPair is a connected loopback TCP pair's two fds, blocking, so a
// read waits for the write before it (loopback delivers in the send).
func loopbackPair(b *testing.B) (from, to int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	fc, err := c.(*net.TCPConn).File()
	if err != nil {
		b.Fatal(err)
	}
	fs, err := s.(*net.TCPConn).File()
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	s.Close()
	b.Cleanup(func() { fc.Close(); fs.Close() })
	return int(fc.Fd()), int(fs.Fd())
}
