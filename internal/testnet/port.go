package testnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// FreePort returns a port free a moment ago for TCP and UDP on every
// address, and reserved for this process against every other test
// process on the machine, so that a test can write it into a config or a
// command line and bind it later.
//
// Two things made the kernel's own choice (a bind to port 0, then a close)
// unsafe for that. go test runs packages as parallel processes, and a
// port one of them had just been handed and closed could be handed to
// another before the first bound it: both then bound it, and with
// SO_REUSEPORT (l4lb's listeners, and what SO_REUSEPORT allows a process
// of the same user) the kernel spread one test's clients over the other
// test's sockets, which showed as a first client reset or never greeted.
// And a port from the ephemeral range may meanwhile become some outgoing
// connection's source port. So the port comes from below the ephemeral
// range, which neither a bind to port 0 nor a connect ever takes, and is
// reserved by an flock on a file named after it, held until the process
// exits: the kernel lets the lock go with the process, crashed or not.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := reservePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeAddr is "127.0.0.1:PORT" with a FreePort.
func FreeAddr(t testing.TB) string { return fmt.Sprintf("127.0.0.1:%d", FreePort(t)) }

// The ports FreePort hands out: below Linux's default ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999) and above the ports the
// bench's plans (-port-base 21000, the chaos run's 19000s) and the demo
// use.
const (
	firstTestPort = 22000
	lastTestPort  = 32767
)

var (
	reserveMu sync.Mutex
	// reserved holds the lock files of the ports this process reserved:
	// open, so the locks last as long as the process.
	reserved = map[int]*os.File{}
)

func reservePort() (int, error) {
	reserveMu.Lock()
	defer reserveMu.Unlock()
	dir := portLockDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	n := lastTestPort - firstTestPort + 1
	start := rand.IntN(n)
	for i := range n {
		port := firstTestPort + (start+i)%n
		if reserved[port] != nil {
			continue
		}
		f, err := lockPort(dir, port)
		if err != nil {
			return 0, err
		}
		if f == nil {
			continue // another process holds it
		}
		if !portFree(port) {
			f.Close() // taken by a socket of something else
			continue
		}
		reserved[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("free port: none of %d-%d is free and unreserved", firstTestPort, lastTestPort)
}

// portLockDir holds the ports' lock files, one directory per user: a
// process cannot share SO_REUSEPORT sockets with another user's.
func portLockDir() string {
	return filepath.Join(os.TempDir(), "l4lb-test-ports-"+strconv.Itoa(os.Getuid()))
}

// lockPort takes the port's lock file, or returns nil when another
// process holds it.
func lockPort(dir string, port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("free port: lock %s: %w", f.Name(), err)
	}
	return f, nil
}

// portFree says whether port can be bound for TCP and for UDP on the
// wildcard addresses without SO_REUSEADDR, which the kernel grants only
// on a port no socket of that protocol uses on any address.
func portFree(port int) bool {
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
		err := bindWildcard(unix.AF_INET6, typ, port)
		if errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL) {
			err = bindWildcard(unix.AF_INET, typ, port) // no IPv6 here
		}
		if err != nil {
			return false
		}
	}
	return true
}

// bindWildcard binds a socket of family and typ to the wildcard address
// (dual-stack for IPv6) at port, and closes it.
func bindWildcard(family, typ, port int) error {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: port}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return err
		}
		sa = &unix.SockaddrInet6{Port: port}
	}
	return unix.Bind(fd, sa)
}
