package sockopt

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func tcpSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// The options land on the socket as the kernel reports them, whole
// seconds rounded up; off leaves the kernel's default (off) alone.
func TestKeepaliveApply(t *testing.T) {
	fd := tcpSocket(t)
	if err := (Keepalive{}).Apply(fd); err != nil {
		t.Fatal(err)
	}
	if on, _, _, _, err := Read(fd); err != nil || on {
		t.Fatalf("off: SO_KEEPALIVE on=%v err=%v", on, err)
	}
	k := Keepalive{Idle: 90 * time.Second, Interval: 1500 * time.Millisecond, Count: 4}
	if err := k.Apply(fd); err != nil {
		t.Fatal(err)
	}
	on, idle, intvl, count, err := Read(fd)
	if err != nil || !on || idle != 90*time.Second || intvl != 2*time.Second || count != 4 {
		t.Fatalf("got on=%v idle=%v interval=%v count=%d err=%v", on, idle, intvl, count, err)
	}
}

// Interval and count left at 0 keep the kernel's values.
func TestKeepaliveKernelDefaults(t *testing.T) {
	fd := tcpSocket(t)
	_, _, intvl0, count0, err := Read(fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := (Keepalive{Idle: time.Minute}).Apply(fd); err != nil {
		t.Fatal(err)
	}
	on, idle, intvl, count, err := Read(fd)
	if err != nil || !on || idle != time.Minute || intvl != intvl0 || count != count0 {
		t.Fatalf("got on=%v idle=%v interval=%v (kernel %v) count=%d (kernel %d)", on, idle, intvl, intvl0, count, count0)
	}
}
