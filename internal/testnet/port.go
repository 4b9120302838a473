package testnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// FreePort returns a port free a moment ago for TCP and UDP on every
// address, and reserved for the test against every other test process of
// the user on the machine until the test ends, so that the test can write
// it into a config or a command line and bind it later.
//
// Two things made the kernel's own choice (a bind to port 0, then a close)
// unsafe for that. go test runs packages as parallel processes, and a
// port one of them had just been handed and closed could be handed to
// another before the first bound it: both then bound it, and with
// SO_REUSEPORT (l4lb's listeners, and what SO_REUSEPORT allows processes
// of one user) the kernel spread one test's clients over the other test's
// sockets, which showed as a first client reset or never greeted. And a
// port from the ephemeral range may meanwhile become some outgoing
// connection's source port. So the port comes from outside the ephemeral
// range (net.ipv4.ip_local_port_range, read here), which neither a bind to
// port 0 nor a connect takes, and is reserved by an flock on a file named
// after it. The lock goes at the test's end (its cleanups run in reverse,
// so after those of the servers the test started with the port) or with
// the process, crashed or not. Test processes of another user lock in a
// directory of their own: between users only the bind check holds.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := reservePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releasePort(port) })
	return port
}

// FreeAddr is "127.0.0.1:PORT" with a FreePort.
func FreeAddr(t testing.TB) string { return fmt.Sprintf("127.0.0.1:%d", FreePort(t)) }

// The ports FreePort may hand out, less the ephemeral range where they
// overlap: above the bench's port plans (-port-base 21000 and the next
// few hundred, the chaos run's 19000s) and the demo's, below Linux's
// default ephemeral range (32768-60999) and the bench tests' configs
// (30000s).
const (
	firstTestPort = 22000
	lastTestPort  = 29999
)

var (
	reserveMu sync.Mutex
	// reserved holds the open lock files of the ports this process holds.
	reserved = map[int]*os.File{}
)

// portLockDir holds the ports' lock files, one directory per user (a
// process cannot share SO_REUSEPORT sockets with another user's), as an
// absolute path with no symlink in it, so that every package's test
// process (each runs in its own directory) finds the same one.
var portLockDir = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(os.TempDir(), "l4lb-test-ports-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	return abs, nil
})

// ephemeralPorts is net.ipv4.ip_local_port_range; Linux's default when it
// cannot be read.
var ephemeralPorts = sync.OnceValues(func() (first, last int) {
	first, last = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return first, last
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return first, last
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return first, last
	}
	return lo, hi
})

func reservePort() (int, error) {
	dir, err := portLockDir()
	if err != nil {
		return 0, err
	}
	lo, hi := ephemeralPorts()
	reserveMu.Lock()
	defer reserveMu.Unlock()
	n := lastTestPort - firstTestPort + 1
	start := rand.IntN(n)
	for i := range n {
		port := firstTestPort + (start+i)%n
		if reserved[port] != nil || (lo <= port && port <= hi) {
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
			f.Close() // a socket of something else has it (or TIME_WAIT)
			continue
		}
		reserved[port] = f
		return port, nil
	}
	return 0, fmt.Errorf("free port: none of %d-%d is free, unreserved and outside the ephemeral range %d-%d", firstTestPort, lastTestPort, lo, hi)
}

// releasePort gives a reservation back.
func releasePort(port int) {
	reserveMu.Lock()
	defer reserveMu.Unlock()
	if f := reserved[port]; f != nil {
		f.Close()
		delete(reserved, port)
	}
}

// reservedFD reports whether fd is the lock file of a port this process
// holds (the leak check's business is the tests' fds, not these).
func reservedFD(fd int) bool {
	reserveMu.Lock()
	defer reserveMu.Unlock()
	for _, f := range reserved {
		if int(f.Fd()) == fd {
			return true
		}
	}
	return false
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
