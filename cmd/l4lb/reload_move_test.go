package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/handoff"
	"github.com/l4lb/l4lb/pkg/listener"
)

// moveConfig is a TCP listener "web" and a UDP listener "dns" on one
// address, over a TCP and a UDP echo backend.
func moveConfig(bind, tcpBackend, udpBackend string) string {
	return fmt.Sprintf(`[global]
event_loops = 2
[admin]
listen = ""
[[listener]]
name = "web"
bind = %[1]q
pool = "web"
[[listener]]
name = "dns"
bind = %[1]q
protocol = "udp"
pool = "dns"
[pool.web]
[pool.web.health]
enabled = false
[[pool.web.backend]]
addr = %[2]q
[pool.dns]
[pool.dns.health]
enabled = false
[[pool.dns.backend]]
addr = %[3]q
`, bind, tcpBackend, udpBackend)
}

// moveFamilies are the address pairs a listener moves between: a
// specific address (which clients dial) and its family's wildcard.
func moveFamilies(t *testing.T) []struct{ name, specific, wildcard string } {
	fams := []struct{ name, specific, wildcard string }{{"ipv4", "127.0.0.1", "0.0.0.0"}}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		fams = append(fams, struct{ name, specific, wildcard string }{"ipv6", "::1", "::"})
	} else {
		t.Logf("no IPv6 loopback here, IPv4 only: %v", err)
	}
	return fams
}

// A reload moves a TCP and a UDP listener from a specific address to its
// family's wildcard on the same port and back, each in one step: the
// listener's own sockets on the old address are not taken for another
// process's. Clients reach the address before, during and after each
// move; a connection accepted before a move is served to its end; the old
// sockets are closed.
func TestReloadMovesAListenerBetweenAnAddressAndTheWildcard(t *testing.T) {
	for _, fam := range moveFamilies(t) {
		t.Run(fam.name, func(t *testing.T) {
			testnet.CheckLeaks(t)
			tb := testnet.StartBackend(t, "t", "")
			ub := testnet.StartUDPBackend(t, "u", "")
			port := testnet.FreePort(t)
			specific := netip.AddrPortFrom(netip.MustParseAddr(fam.specific), uint16(port))
			wildcard := netip.AddrPortFrom(netip.MustParseAddr(fam.wildcard), uint16(port))
			dial := specific.String() // what clients use, whichever bind serves it

			in, path := startFile(t, moveConfig(specific.String(), tb.Addr, ub.Addr))
			served(t, dial)
			held := openEcho(t, dial)
			defer held.Close()

			for i, to := range []netip.AddrPort{wildcard, specific, wildcard} {
				from := specific
				if to == specific {
					from = wildcard
				}
				if err := os.WriteFile(path, []byte(moveConfig(to.String(), tb.Addr, ub.Addr)), 0o644); err != nil {
					t.Fatal(err)
				}
				res, errs := in.reload()
				if len(errs) > 0 {
					t.Fatalf("move %d, %s -> %s: reload failed: %v", i+1, from, to, errs)
				}
				if res.Added != 2 || res.Removed != 2 {
					t.Fatalf("move %d: %+v, want both listeners added and removed", i+1, res)
				}
				served(t, dial)
				for _, proto := range []string{"tcp", "udp"} {
					testnet.Eventually(t, fmt.Sprintf("%s sockets on %s closed after the move", proto, from), func() bool {
						return len(unconnectedSockets(t, proto, from)) == 0
					})
					if n := len(unconnectedSockets(t, proto, to)); n != 2 {
						t.Fatalf("move %d: %d %s sockets on %s, want 2 (one per loop)", i+1, n, proto, to)
					}
				}
				held.echo(t, fmt.Sprintf("still served after move %d", i+1))
			}
		})
	}
}

// The same move across a binary upgrade: the new process binds the
// wildcard while the old one (and its own inherited copies) still hold the
// specific address, which it closes once the new one serves.
func TestUpgradeMovesAListenerBetweenAnAddressAndTheWildcard(t *testing.T) {
	for _, fam := range moveFamilies(t) {
		t.Run(fam.name, func(t *testing.T) {
			testnet.CheckLeaks(t)
			tb := testnet.StartBackend(t, "t", "")
			ub := testnet.StartUDPBackend(t, "u", "")
			port := testnet.FreePort(t)
			specific := netip.AddrPortFrom(netip.MustParseAddr(fam.specific), uint16(port))
			wildcard := netip.AddrPortFrom(netip.MustParseAddr(fam.wildcard), uint16(port))
			dial := specific.String()

			cfg, err := config.Parse("l4lb.toml", []byte(moveConfig(specific.String(), tb.Addr, ub.Addr)))
			if err != nil {
				t.Fatal(err)
			}
			old, err := start(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			oldDone := false
			defer func() {
				if !oldDone {
					old.shutdown(t.Context())
				}
			}()
			served(t, dial)
			// What an upgrade passes to the new process: the old one's
			// listening sockets, duplicated.
			socks, err := old.server.HandoffSockets()
			if err != nil {
				t.Fatal(err)
			}
			fds := make([]int, len(socks))
			for i, s := range socks {
				fds[i] = s.FD
			}
			set, errs := listener.NewInheritedSet(fds)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			inh := handoff.None()
			inh.From, inh.Sockets = "upgrade", set
			cfg, err = config.Parse("l4lb.toml", []byte(moveConfig(wildcard.String(), tb.Addr, ub.Addr)))
			if err != nil {
				t.Fatal(err)
			}
			next, err := startInherited(cfg, slog.New(slog.DiscardHandler), inh)
			if err != nil {
				t.Fatalf("the new process did not start on %s beside the old one on %s: %v", wildcard, specific, err)
			}
			defer next.shutdown(t.Context())
			// The new process closed the inherited sockets nothing took.
			// The old one still serves them until it hands over.
			served(t, dial)
			old.server.Unwatch()
			old.shutdown(t.Context())
			oldDone = true
			for _, proto := range []string{"tcp", "udp"} {
				testnet.Eventually(t, proto+" sockets on "+specific.String()+" closed after the upgrade", func() bool {
					return len(unconnectedSockets(t, proto, specific)) == 0
				})
			}
			served(t, dial)
		})
	}
}

// served checks that a TCP client and a UDP client of addr each reach
// their backend.
func served(t *testing.T, addr string) {
	t.Helper()
	if tag, err := testnet.Hello(addr, ""); err != nil || tag != "t" {
		t.Fatalf("tcp %s: %q %v, want the backend's tag", addr, tag, err)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	// A datagram may be lost; the answer comes within a few tries.
	for try := 0; ; try++ {
		c.Write([]byte("who"))
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(buf)
		if err == nil && string(buf[:n]) == "u" {
			return
		}
		if try == 20 {
			t.Fatalf("udp %s: no answer from the backend (%v)", addr, err)
		}
	}
}

// heldConn is a client connection kept open across reloads.
type heldConn struct {
	net.Conn
	r *bufio.Reader
}

func openEcho(t *testing.T, addr string) *heldConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldConn{Conn: c, r: bufio.NewReader(c)}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := h.r.ReadString('\n'); err != nil {
		c.Close()
		t.Fatalf("tag: %v", err)
	}
	return h
}

func (h *heldConn) echo(t *testing.T, line string) {
	t.Helper()
	h.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintln(h, line); err != nil {
		t.Fatalf("held connection: write: %v", err)
	}
	got, err := h.r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("held connection: read %q %v, want %q", got, err, line)
	}
}

// unconnectedSockets lists the inodes of this process's sockets of proto
// bound to exactly ap and connected to nothing (listening TCP sockets,
// unconnected UDP ones), from /proc/self/net. Only this process's: the
// table is the network namespace's, and a test process running beside
// this one may hold a socket on the same port (SO_REUSEPORT lets it).
func unconnectedSockets(t *testing.T, proto string, ap netip.AddrPort) []string {
	t.Helper()
	mine := ownSocketInodes(t)
	table := proto
	if ap.Addr().Is6() {
		table += "6"
	}
	data, err := os.ReadFile("/proc/self/net/" + table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		local, lerr := procAddrPort(f[1])
		remote, rerr := procAddrPort(f[2])
		if lerr != nil || rerr != nil {
			t.Fatalf("%s: %q: %v %v", table, sc.Text(), lerr, rerr)
		}
		if local == ap && remote.Port() == 0 && f[9] != "0" && mine[f[9]] {
			out = append(out, f[9])
		}
	}
	return out
}

// ownSocketInodes are the inodes of the sockets this process holds open.
func ownSocketInodes(t *testing.T) map[string]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			out[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return out
}

// procAddrPort decodes /proc/net/tcp's "0100007F:1F90": 32-bit words of
// the address in host byte order, the port in hex.
func procAddrPort(s string) (netip.AddrPort, error) {
	host, port, _ := strings.Cut(s, ":")
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	raw := make([]byte, 0, 16)
	for i := 0; i+8 <= len(host); i += 8 {
		w, err := strconv.ParseUint(host[i:i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, err
		}
		raw = binary.NativeEndian.AppendUint32(raw, uint32(w))
	}
	a, ok := netip.AddrFromSlice(raw)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q", host)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// Another process's socket on the port is still refused by such a move,
// clearly, and the running configuration stays: here one that would be
// joined silently (SO_REUSEPORT, the same user, on the very address the
// listener moves to).
func TestReloadMoveRefusesAnotherSocketOnThePort(t *testing.T) {
	testnet.CheckLeaks(t)
	tb := testnet.StartBackend(t, "t", "")
	ub := testnet.StartUDPBackend(t, "u", "")
	port := testnet.FreePort(t)
	specific := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	wildcard := netip.AddrPortFrom(netip.MustParseAddr("0.0.0.0"), uint16(port))
	in, path := startFile(t, moveConfig(specific.String(), tb.Addr, ub.Addr))

	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 8); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(path, []byte(moveConfig(wildcard.String(), tb.Addr, ub.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs := in.reload()
	if len(errs) != 1 || !strings.Contains(errs[0], `listener "web" on 0.0.0.0:`) || !strings.Contains(errs[0], "already in use by another socket") {
		t.Fatalf("reload errors %q, want the listener's address in use by another socket", errs)
	}
	served(t, specific.String())
	for _, proto := range []string{"tcp", "udp"} {
		if n := len(unconnectedSockets(t, proto, specific)); n != 2 {
			t.Fatalf("%d %s sockets on %s after the failed reload, want its 2", n, proto, specific)
		}
		if n := len(unconnectedSockets(t, proto, wildcard)); n != map[string]int{"tcp": 1, "udp": 0}[proto] {
			t.Fatalf("%d %s sockets on %s after the failed reload, want only the other socket", n, proto, wildcard)
		}
	}
}
