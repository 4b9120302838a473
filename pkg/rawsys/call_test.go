package rawsys

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// A write that moved nothing and said nothing is an error, so no loop
// retries it forever; EAGAIN and progress pass as they are.
func TestProgressGuard(t *testing.T) {
	for _, tc := range []struct {
		n       int
		err     error
		wantErr error
	}{
		{0, nil, ErrNoProgress},
		{0, unix.EAGAIN, unix.EAGAIN},
		{4, nil, nil},
	} {
		n, err := Progress(tc.n, tc.err)
		if n != tc.n || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("Progress(%d, %v) = %d, %v; want %d, %v", tc.n, tc.err, n, err, tc.n, tc.wantErr)
		}
	}
}

// Send and Recv move bytes on a socket pair, and a peer's end reads as 0.
func TestSendRecvOnASocketPair(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(fds[1])
	if n, err := Send(fds[0], []byte("hello"), unix.MSG_NOSIGNAL); n != 5 || err != nil {
		t.Fatalf("Send = %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := Recv(fds[1], buf, unix.MSG_PEEK|unix.MSG_DONTWAIT); n != 5 || err != nil {
		t.Fatalf("peek = %d, %v", n, err)
	}
	if n, err := Recv(fds[1], buf, 0); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Recv = %d %q, %v", n, buf[:n], err)
	}
	if _, err := Recv(fds[1], buf, 0); err != unix.EAGAIN {
		t.Fatalf("Recv of an empty socket: %v, want EAGAIN", err)
	}
	Close(fds[0])
	if n, err := Recv(fds[1], buf, 0); n != 0 || err != nil {
		t.Fatalf("Recv after the peer closed = %d, %v; want 0, nil", n, err)
	}
}
