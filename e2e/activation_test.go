package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// systemdSocket makes a socket as systemd does for ListenStream= or
// ListenDatagram=: plain (no SO_REUSEPORT), blocking, bound, listening for
// TCP. It returns it as a file for ExtraFiles, and its address.
func systemdSocket(t *testing.T, typ int) (*os.File, string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	if typ == unix.SOCK_STREAM {
		if err := unix.Listen(fd, 128); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
	}
	sa, _ := unix.Getsockname(fd)
	a := sa.(*unix.SockaddrInet4)
	f := os.NewFile(uintptr(fd), "sd")
	t.Cleanup(func() { f.Close() })
	return f, netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)).String()
}

// startActivated starts l4lb the way systemd starts a
// socket-activated service: the sockets from fd 3 on, LISTEN_FDS their
// number, LISTEN_PID the service's own pid (listenPID "self"; anything else
// is taken literally).
func startActivated(t *testing.T, files []*os.File, listenPID string, args ...string) *proc {
	t.Helper()
	pidExpr := "$$" // the shell's pid, which exec keeps
	if listenPID != "self" {
		pidExpr = listenPID
	}
	script := fmt.Sprintf(`LISTEN_PID=%s LISTEN_FDS=%d exec "$0" "$@"`, pidExpr, len(files))
	p := &proc{stdout: &testnet.LogBuffer{}, stderr: &testnet.LogBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command("/bin/sh", append([]string{"-c", script, l4lbBin}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.ExtraFiles = files
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("l4lb stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// Socket activation (LISTEN_FDS): listeners, and the admin endpoint, whose
// address matches a passed socket serve it instead of binding; a socket no
// listener wants is closed and logged. One socket per listener, as systemd
// passes it: the TCP one is shared by the event loops (each registers it;
// pkg/server tests that every loop accepts from a shared socket), the UDP
// one served by one loop.
func TestSocketActivation(t *testing.T) {
	testnet.CheckLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	ub := testnet.StartUDPBackend(t, "u", "")
	tcpF, tcpAddr := systemdSocket(t, unix.SOCK_STREAM)
	udpF, udpAddr := systemdSocket(t, unix.SOCK_DGRAM)
	adminF, adminAddr := systemdSocket(t, unix.SOCK_STREAM)
	strayF, strayAddr := systemdSocket(t, unix.SOCK_STREAM)
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	os.WriteFile(path, []byte(fmt.Sprintf(`[global]
event_loops = 2
[admin]
listen = %q
[[listener]]
name = "web"
bind = %q
pool = "web"
[[listener]]
name = "dns"
bind = %q
protocol = "udp"
pool = "dns"
[pool.web]
[pool.web.health]
enabled = false
[[pool.web.backend]]
addr = %q
[pool.dns]
[pool.dns.health]
enabled = false
[[pool.dns.backend]]
addr = %q
`, adminAddr, tcpAddr, udpAddr, be.Addr, ub.Addr)), 0o644)
	files := []*os.File{tcpF, udpF, adminF, strayF}

	t.Run("LISTEN_PID of another process", func(t *testing.T) {
		// Not meant for l4lb: it binds itself, and the addresses are
		// held (by this test) so the start fails.
		p := startActivated(t, files, "1", "-config", path)
		if code := p.wait(t); code != 1 || !strings.Contains(p.stderr.String(), "already in use") {
			t.Fatalf("exit %d, want 1 with the address in use:\n%s", code, p.stderr.String())
		}
	})

	p := startActivated(t, files, "self", "-config", path)
	// The test still holds every socket: an l4lb that bound instead of
	// taking them would have failed with the address in use.
	waitServing(t, p, tcpAddr)
	for _, f := range files {
		f.Close()
	}
	for i := range 20 {
		if tag, err := testnet.Hello(tcpAddr, ""); err != nil || tag != "b" {
			t.Fatalf("client %d: %q, %v", i, tag, err)
		}
	}
	c := udpClient(t, udpAddr)
	if reply, err := askUDP(c, "who"); err != nil || reply != "u" {
		t.Fatalf("datagram: %q, %v", reply, err)
	}
	// The admin endpoint answers on the passed socket; the clients above
	// closed, and l4lb ends their relays when it sees that.
	testnet.Eventually(t, "the admin endpoint on the passed socket to count no open connection", func() bool {
		return e2eutil.Metric(t, adminAddr, "l4lb_client_connections_open") == 0
	})
	log := p.stderr.String()
	for _, want := range []string{
		`msg="listener on inherited sockets" listener=web protocol=tcp addr=` + tcpAddr + ` sockets=1 from=systemd`,
		`msg="listener on inherited sockets" listener=dns protocol=udp addr=` + udpAddr + ` sockets=1 from=systemd`,
		`msg="admin endpoint on an inherited socket" addr=` + adminAddr + ` from=systemd`,
		`address="tcp ` + strayAddr + `" sockets=1 from=systemd`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// The stray socket is closed: nothing accepts there any more.
	if c, err := net.DialTimeout("tcp", strayAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("the socket no listener wanted still accepts")
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// udpClient is a connected UDP socket to addr.
func udpClient(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// askUDP sends q until a reply comes (a few tries) and returns it.
func askUDP(c *net.UDPConn, q string) (string, error) {
	buf := make([]byte, 2048)
	var err error
	for range 10 {
		c.Write([]byte(q))
		c.SetReadDeadline(time.Now().Add(time.Second))
		var n int
		if n, err = c.Read(buf); err == nil {
			return string(buf[:n]), nil
		}
	}
	return "", err
}
