package udpsession

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// quiet must find anything a parked socket holds, a datagram or a pending
// error, without taking the datagram.
func TestQuietSeesDatagramsAndErrors(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fd, err := connectUDP(srv.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if !quiet(fd) {
		t.Fatal("an empty socket is not quiet")
	}
	if err := sendDatagram(fd, []byte("q")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, from, err := srv.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	srv.WriteToUDP([]byte("late"), from)
	deadline := time.Now().Add(20 * time.Second)
	for quiet(fd) {
		if time.Now().After(deadline) {
			t.Fatal("a socket holding a datagram stays quiet")
		}
		time.Sleep(time.Millisecond)
	}
	if n, err := unix.Read(fd, buf); err != nil || string(buf[:n]) != "late" {
		t.Fatalf("the peek took the datagram: read %q, %v", buf[:max(n, 0)], err)
	}
	if !quiet(fd) {
		t.Fatal("not quiet once read")
	}
	srv.Close() // the port refuses now
	if err := sendDatagram(fd, []byte("refused")); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for quiet(fd) {
		if time.Now().After(deadline) {
			t.Fatal("a socket with a pending refusal stays quiet")
		}
		time.Sleep(time.Millisecond)
	}
}
