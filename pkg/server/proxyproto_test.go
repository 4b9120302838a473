package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/proxyproto"
	"github.com/l4lb/l4lb/pkg/relay"
)

// A pool's proxy_protocol: the backend reads a header naming the client
// and the address it connected to, then the client's bytes, intact; over
// IPv4 and IPv6, v1 and v2.
func TestProxyProtocolToBackend(t *testing.T) {
	for _, version := range []string{"v1", "v2"} {
		for _, family := range []string{"ipv4", "ipv6"} {
			t.Run(version+"/"+family, func(t *testing.T) {
				noLeaks(t)
				be := startPPBackend(t, "A")
				bind, local := testnet.FreeAddr(t), "127.0.0.1"
				if family == "ipv6" {
					bind, local = freeAddr6(t), "::1"
				}
				l := startLB(t, policyTOML(t, bind, "", "round-robin",
					fmt.Sprintf("proxy_protocol = %q", version), beSpec{addr: be.Addr}), 0)

				for i := range 3 {
					c := dialFrom(t, local, l.addr)
					// The first bytes go out at once: they wait in the
					// kernel while l4lb dials, and must reach the backend
					// after the header, whole.
					first := []byte(fmt.Sprintf("first bytes of client %d\r\nPROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n", i))
					if _, err := c.Write(first); err != nil {
						t.Fatal(err)
					}
					ans := readPPAnswer(t, c)
					if want := mustAddrPort(t, c.LocalAddr()); ans.src != want {
						t.Errorf("backend read source %v, want the client %v", ans.src, want)
					}
					if want := mustAddrPort(t, c.RemoteAddr()); ans.dst != want {
						t.Errorf("backend read destination %v, want the listener %v", ans.dst, want)
					}
					if ans.version != version {
						t.Errorf("backend read a %s header, want %s", ans.version, version)
					}
					if family == "ipv6" && !ans.src.Addr().Is6() {
						t.Errorf("source %v is not IPv6", ans.src)
					}
					readExactly(t, c, first)
					big := []byte(strings.Repeat("0123456789abcdef", 4096))
					echoed(t, c, big)
					c.CloseWrite()
					c.SetReadDeadline(time.Now().Add(20 * time.Second))
					if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
						t.Fatalf("after the echo: %q, %v; want a clean EOF", rest, err)
					}
				}
				waitCloses(t, l, relay.CloseCompleted, 3)
				checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseCompleted: 3})
			})
		}
	}
}

// proxyTOML is a listener that accepts PROXY headers from trusted (with
// a proxy_timeout of 200ms) and extra, feeding a pool that sends v2
// headers to the backends.
func proxyTOML(t *testing.T, trusted, extra, algorithm string, backends ...beSpec) string {
	return policyTOML(t, "",
		fmt.Sprintf("accept_proxy = true\ntrusted_proxies = [%q]\nproxy_timeout = \"200ms\"\n%s", trusted, extra),
		algorithm, `proxy_protocol = "v2"`, backends...)
}

// header is a PROXY header of version v naming src as the client and dst
// as what it connected to.
func header(v int, src, dst netip.AddrPort) []byte {
	if v == 1 {
		return proxyproto.AppendV1(nil, src, dst)
	}
	return proxyproto.AppendV2(nil, proxyproto.Stream, src, dst)
}

// writeSplit writes b in pieces cut at cuts, pausing between them so each
// is likely a segment of its own (the pauses only make the case happen;
// nothing is asserted on them).
func writeSplit(t *testing.T, c net.Conn, b []byte, cuts ...int) {
	t.Helper()
	prev := 0
	for _, at := range append(cuts, len(b)) {
		if _, err := c.Write(b[prev:at]); err != nil {
			t.Fatal(err)
		}
		prev = at
		if at < len(b) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A listener with accept_proxy takes the client's address from its header:
// the backend is told that one (the pool's own v2 header), and the bytes
// after the header arrive intact, whether they come in the header's
// segment or the header comes in pieces.
func TestAcceptProxyHeader(t *testing.T) {
	fake := netip.MustParseAddrPort("203.0.113.7:4242")
	for _, v := range []int{1, 2} {
		for _, split := range []bool{false, true} {
			name := fmt.Sprintf("v%d/one-segment", v)
			if split {
				name = fmt.Sprintf("v%d/split", v)
			}
			t.Run(name, func(t *testing.T) {
				noLeaks(t)
				be := startPPBackend(t, "A")
				l := startLB(t, proxyTOML(t, "127.0.0.0/8", "", "round-robin", beSpec{addr: be.Addr}), 0)
				c := dialFrom(t, "127.0.0.1", l.addr)
				dst := netip.MustParseAddrPort("198.51.100.1:443")
				payload := []byte("GET / HTTP/1.0\r\n\r\nafter the header")
				msg := append(header(v, fake, dst), payload...)
				if split {
					hl := len(header(v, fake, dst))
					writeSplit(t, c, msg, 1, 5, 14, hl-1, hl)
				} else if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				ans := readPPAnswer(t, c)
				if ans.src != fake || ans.dst != dst {
					t.Errorf("backend told %v -> %v, want the header's %v -> %v", ans.src, ans.dst, fake, dst)
				}
				if ans.version != "v2" {
					t.Errorf("backend read a %s header, want the pool's v2", ans.version)
				}
				readExactly(t, c, payload)
				echoed(t, c, []byte("and more"))
				c.Close()
				waitCloses(t, l, relay.CloseCompleted, 1)
				checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseCompleted: 1})
				be.mu.Lock()
				peer := be.peers[0]
				be.mu.Unlock()
				if !strings.HasPrefix(peer, "127.") {
					t.Errorf("backend's real peer %s", peer)
				}
			})
		}
	}

	// A v2 LOCAL header carries no address: the connection's own stand.
	t.Run("v2/local", func(t *testing.T) {
		noLeaks(t)
		be := startPPBackend(t, "A")
		l := startLB(t, proxyTOML(t, "127.0.0.0/8", "", "round-robin", beSpec{addr: be.Addr}), 0)
		c := dialFrom(t, "127.0.0.3", l.addr)
		if _, err := c.Write(append(proxyproto.AppendV2Local(nil), "x"...)); err != nil {
			t.Fatal(err)
		}
		ans := readPPAnswer(t, c)
		if want := mustAddrPort(t, c.LocalAddr()); ans.src != want {
			t.Errorf("backend told source %v, want the real peer %v", ans.src, want)
		}
		readExactly(t, c, []byte("x"))
	})
}

// The header's address is the client's for everything: ip-hash picks by
// it (two fake sources from one real peer land where their hashes say),
// and deny and per-source limits judge it.
func TestAcceptProxyPicksAndJudgesByHeaderSource(t *testing.T) {
	t.Run("ip-hash", func(t *testing.T) {
		noLeaks(t)
		a, b := startPPBackend(t, "A"), startPPBackend(t, "B")
		l := startLB(t, proxyTOML(t, "127.0.0.0/8", "", "ip-hash", beSpec{addr: a.Addr}, beSpec{addr: b.Addr}), 0)
		p := l.pools["p"]
		tagOf := map[string]string{a.Addr: "A", b.Addr: "B"}
		owner := func(src netip.AddrPort) string {
			cands, _ := p.Plan(src, nil)
			if len(cands) == 0 {
				t.Fatalf("no plan for %v", src)
			}
			return tagOf[p.At(cands[0]).Addr]
		}
		// Two fake sources whose hashes pick different backends.
		var fakes []netip.AddrPort
		seen := map[string]bool{}
		for i := 1; i < 255 && len(fakes) < 2; i++ {
			f := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 4242)
			if o := owner(f); !seen[o] {
				seen[o] = true
				fakes = append(fakes, f)
			}
		}
		if len(fakes) != 2 {
			t.Fatalf("no two sources of 203.0.113.0/24 hash apart: %v", fakes)
		}
		dst := netip.MustParseAddrPort("198.51.100.1:443")
		for round := range 3 {
			for i, f := range fakes {
				c := dialFrom(t, "127.0.0.1", l.addr)
				if _, err := c.Write(append(header(1+(round+i)%2, f, dst), "hi"...)); err != nil {
					t.Fatal(err)
				}
				ans := readPPAnswer(t, c)
				if ans.tag != owner(f) || ans.src != f {
					t.Fatalf("fake source %v reached %s told %v, want %s (its hash owner) told %v", f, ans.tag, ans.src, owner(f), f)
				}
				readExactly(t, c, []byte("hi"))
				c.Close()
			}
		}
		if a.Accepted() != 3 || b.Accepted() != 3 {
			t.Fatalf("backends accepted %d and %d, want 3 each", a.Accepted(), b.Accepted())
		}
	})

	t.Run("deny-and-limits", func(t *testing.T) {
		noLeaks(t)
		be := startPPBackend(t, "A")
		l := startLB(t, proxyTOML(t, "127.0.0.0/8", "deny = [\"203.0.113.66\"]\nmax_connections_per_source = 1", "round-robin", beSpec{addr: be.Addr}), 0)
		dst := netip.MustParseAddrPort("198.51.100.1:443")
		// Denied by its header's address, though its real peer is fine.
		c := dialFrom(t, "127.0.0.1", l.addr)
		if _, err := c.Write(header(2, netip.MustParseAddrPort("203.0.113.66:1"), dst)); err != nil {
			t.Fatal(err)
		}
		refused(t, c, false)
		waitCloses(t, l, relay.CloseDenied, 1)
		// One connection per header source: a second from the same fake
		// source is refused, one from another fake source (same real
		// peer) is served.
		open := func(src string) *net.TCPConn {
			c := dialFrom(t, "127.0.0.1", l.addr)
			if _, err := c.Write(header(2, netip.MustParseAddrPort(src), dst)); err != nil {
				t.Fatal(err)
			}
			return c
		}
		c1 := open("203.0.113.1:1")
		readPPAnswer(t, c1)
		refused(t, open("203.0.113.1:2"), false)
		waitCloses(t, l, relay.CloseSourceConnections, 1)
		c3 := open("203.0.113.2:1")
		readPPAnswer(t, c3)
		if be.Accepted() != 2 {
			t.Fatalf("backend accepted %d, want 2", be.Accepted())
		}
	})
}

// resetSeen checks that l4lb reset c without relaying a byte: the reset
// is reported by the write (werr) that came after it, or by a read.
func resetSeen(t *testing.T, c net.Conn, werr error) {
	t.Helper()
	if werr != nil {
		if !errors.Is(werr, syscall.ECONNRESET) && !errors.Is(werr, syscall.EPIPE) {
			t.Fatalf("write: %v, want a reset", werr)
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if b, err := io.ReadAll(c); len(b) > 0 {
			t.Fatalf("got %q (%v) after the reset", b, err)
		}
		return
	}
	refused(t, c, true)
}

// sendReset connects from local, sends b (if any) and checks that l4lb
// resets the connection without relaying a byte. On loopback the reset
// can come before the connect returns: connect then reports it.
func sendReset(t *testing.T, local, addr string, b []byte) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var werr error
	if len(b) > 0 {
		_, werr = c.Write(b)
	}
	resetSeen(t, c, werr)
}

// Refused PROXY clients: an untrusted peer is reset before l4lb reads a
// byte, a malformed header and a header that never comes are reset, and
// the backend hears of none of them.
func TestAcceptProxyRefusals(t *testing.T) {
	fake := netip.MustParseAddrPort("203.0.113.7:4242")
	dst := netip.MustParseAddrPort("198.51.100.1:443")

	t.Run("untrusted", func(t *testing.T) {
		noLeaks(t)
		be := startPPBackend(t, "A")
		l := startLB(t, proxyTOML(t, "10.0.0.0/8", "", "round-robin", beSpec{addr: be.Addr}), 0)
		sendReset(t, "127.0.0.1", l.addr, append(header(1, fake, dst), "data"...))
		sendReset(t, "127.0.0.2", l.addr, nil) // silent: reset all the same
		waitCloses(t, l, relay.CloseProxyUntrusted, 2)
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseProxyUntrusted: 2})
		if n := be.Accepted(); n != 0 {
			t.Fatalf("backend accepted %d connections", n)
		}
		if st := l.listener("front"); st.Rejected != 2 || st.OK != 0 {
			t.Fatalf("stats %+v, want 2 rejected", st)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		noLeaks(t)
		be := startPPBackend(t, "A")
		l := startLB(t, proxyTOML(t, "127.0.0.0/8", "", "round-robin", beSpec{addr: be.Addr}), 0)
		bad := [][]byte{
			[]byte("GET / HTTP/1.0\r\n\r\n"),
			[]byte("PROXY TCP4 203.0.113.7 nope 1 2\r\ndata"),
			append(append([]byte{}, header(2, fake, dst)[:12]...), 0x99, 0x11, 0, 12), // v2 signature, bad version
		}
		for _, b := range bad {
			sendReset(t, "127.0.0.1", l.addr, b)
		}
		// A peer that closes within its header.
		c := dialFrom(t, "127.0.0.1", l.addr)
		if _, err := c.Write([]byte("PROXY TCP4 203.0.")); err != nil {
			t.Fatal(err)
		}
		c.CloseWrite()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if b, _ := io.ReadAll(c); len(b) > 0 {
			t.Fatalf("got %q", b)
		}
		waitCloses(t, l, relay.CloseProxyHeader, int64(len(bad)+1))
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseProxyHeader: int64(len(bad) + 1)})
		if n := be.Accepted(); n != 0 {
			t.Fatalf("backend accepted %d connections", n)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		noLeaks(t)
		be := startPPBackend(t, "A")
		l := startLB(t, proxyTOML(t, "127.0.0.0/8", "", "round-robin", beSpec{addr: be.Addr}), 0)
		start := time.Now()
		silent := dialFrom(t, "127.0.0.1", l.addr)
		partial := dialFrom(t, "127.0.0.1", l.addr)
		if _, err := partial.Write(header(1, fake, dst)[:10]); err != nil {
			t.Fatal(err)
		}
		refused(t, silent, true)
		refused(t, partial, true)
		// One-sided on purpose, as the queue timeout's: "not reset before
		// proxy_timeout" (load only makes it later; start precedes both
		// dials), the counters say the timeout was the reason.
		if d := time.Since(start); d < 190*time.Millisecond {
			t.Fatalf("reset after %v, before proxy_timeout (200ms)", d)
		}
		waitCloses(t, l, relay.CloseProxyTimeout, 2)
		checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseProxyTimeout: 2})
		if n := be.Accepted(); n != 0 {
			t.Fatalf("backend accepted %d connections", n)
		}
	})
}

// A backend that accepts and resets before the loop has looked at the
// connect: with or without a PROXY header to send, the client is reset
// and the end is the backend's (backend_reset), not this host's trouble
// (local_error). The loop is held (a task, then the connection cap's hook)
// so the reset lands between the connect and the loop's look at it.
func TestProxyProtocolBackendResetAtConnect(t *testing.T) {
	for _, pp := range []string{"off", "v1", "v2"} {
		t.Run(pp, func(t *testing.T) {
			noLeaks(t)
			k := testnet.StartTaker(t)
			capped, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			l := startLBHooked(t, policyTOML(t, "", "", "round-robin", fmt.Sprintf("proxy_protocol = %q", pp), beSpec{addr: k.Addr}), 1,
				func(sh *relay.Shared) {
					sh.OnCap = func() {
						once.Do(func() {
							close(capped)
							<-release
						})
					}
				})
			held, unhold := make(chan struct{}), make(chan struct{})
			var releaseOnce, unholdOnce sync.Once
			t.Cleanup(func() { // before the shutdown: never leave the loop held
				unholdOnce.Do(func() { close(unhold) })
				releaseOnce.Do(func() { close(release) })
			})
			l.server.loops[0].Post(func() {
				close(held)
				<-unhold
			})
			<-held
			// Both wait in the accept queue: the loop takes them in one
			// batch, dials for the first, then stops in the cap's hook
			// for the second.
			c1 := dialFrom(t, "127.0.0.1", l.addr)
			c2 := dialFrom(t, "127.0.0.1", l.addr)
			unholdOnce.Do(func() { close(unhold) })
			select {
			case <-capped:
			case <-time.After(20 * time.Second):
				t.Fatal("the second client never met the connection cap")
			}
			bc := k.Next(t)
			fd := findSocket(mustAddrPort(t, bc.RemoteAddr()), mustAddrPort(t, bc.LocalAddr()))
			if fd < 0 {
				t.Fatal("l4lb's backend socket not found")
			}
			bc.SetLinger(0)
			bc.Close() // a reset
			testnet.Eventually(t, "l4lb's backend socket to take the reset", func() bool {
				info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
				return err == nil && info.State == 7 // TCP_CLOSE
			})
			releaseOnce.Do(func() { close(release) })
			refused(t, c2, false) // at the cap
			refused(t, c1, true)
			testnet.Eventually(t, "both clients to end", func() bool { return l.server.Active() == 0 })
			checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseConnectionCap: 1, relay.CloseBackendReset: 1})
		})
	}
}
