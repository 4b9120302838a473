package dialer

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

func opErr(errno syscall.Errno) error {
	return &DialError{Backend: "127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil is success", nil, Success},
		{"refused", opErr(syscall.ECONNREFUSED), Failure},
		{"reset", opErr(syscall.ECONNRESET), Failure},
		{"host unreachable", opErr(syscall.EHOSTUNREACH), Failure},
		{"network unreachable", opErr(syscall.ENETUNREACH), Failure},
		{"kernel timeout", opErr(syscall.ETIMEDOUT), Failure},
		{"connect timeout", &DialError{Err: &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}}, Failure},
		{"context deadline", &DialError{Err: context.DeadlineExceeded}, Failure},
		{"out of fds", opErr(syscall.EMFILE), Local},
		{"system out of fds", opErr(syscall.ENFILE), Local},
		{"out of local ports", opErr(syscall.EADDRNOTAVAIL), Local},
		{"out of buffers", opErr(syscall.ENOBUFS), Local},
		{"out of memory", opErr(syscall.ENOMEM), Local},
		{"called off (client left, shutdown)", &DialError{Err: &net.OpError{Op: "dial", Err: context.Canceled}}, Local},
		{"unknown error counts against the backend", errors.New("strange"), Failure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Fatalf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestDialRealSockets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	refused := testnet.FreeAddr(t)
	defer ln.Close()

	d := New(time.Second)
	c, err := d.Dial(context.Background(), open)
	if err != nil || Classify(err) != Success {
		t.Fatalf("dial to a listener: %v", err)
	}
	raw, _ := c.SyscallConn()
	raw.Control(func(fd uintptr) {
		if v, _ := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY); v != 1 {
			t.Error("backend connection without TCP_NODELAY")
		}
		if v, _ := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE); v != 0 {
			t.Error("backend connection with keepalive probes (they cost syscalls per connection)")
		}
	})
	c.Close()

	_, err = d.Dial(context.Background(), refused)
	var de *DialError
	if !errors.As(err, &de) || de.Backend != refused || Classify(err) != Failure || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed port: %v (outcome %v), want a refused *DialError", err, Classify(err))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Dial(ctx, open); Classify(err) != Local {
		t.Fatalf("canceled dial: %v (outcome %v), want local", err, Classify(err))
	}
}

func TestDialTimeoutOnFrozenBackend(t *testing.T) {
	// A listener that never accepts, its queue already full (known from
	// the kernel's count, not from filler dials timing out, which a busy
	// machine can make happen early): the kernel drops further SYNs, so
	// the connect can only time out.
	addr := testnet.FrozenBackend(t)
	_, err := New(300*time.Millisecond).Dial(context.Background(), addr)
	if err == nil || Classify(err) != Failure {
		t.Fatalf("dial to a frozen backend: %v (outcome %v), want a timeout failure", err, Classify(err))
	}
}
