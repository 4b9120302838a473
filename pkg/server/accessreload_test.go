package server

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// A reload that flips access_log applies to each record as it is written:
// a TCP connection or UDP session that ends while its listener is out of
// the access log writes no line, wherever it began; one that ends after
// the listener is back writes its close line, though it began while out.
// Both protocols, built from the configuration as l4lb builds them
// (Frontends).
func TestReloadFlipsAccessLog(t *testing.T) {
	noLeaks(t)
	k := testnet.StartTaker(t)
	echo := testnet.StartUDPBackend(t, "u", "")
	tcpBind, udpBind := testnet.FreeAddr(t), fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	text := func(accessLog bool) string {
		return fmt.Sprintf(`[admin]
listen = ""
[[listener]]
name = "web"
bind = %q
pool = "web"
access_log = %[3]v
[[listener]]
name = "dns"
bind = %[2]q
protocol = "udp"
pool = "dns"
responses = 2
access_log = %[3]v
[pool.web]
[pool.web.health]
enabled = false
[[pool.web.backend]]
addr = %[4]q
[pool.dns]
[pool.dns.health]
enabled = false
[[pool.dns.backend]]
addr = %[5]q
`, tcpBind, udpBind, accessLog, k.Addr, echo.Addr)
	}
	l := startLB(t, text(true), 0)
	s := l.server
	_, buf := startAccessLog(t, s, "json")
	reload := func(accessLog bool) {
		t.Helper()
		cfg, err := config.Parse("test.toml", []byte(text(accessLog)))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := s.Reload(l.frontends(t, cfg), ConnCap{MaxConnections: 100}); err != nil || st.Kept != 2 {
			t.Fatalf("reload: %+v, %v", st, err)
		}
	}
	dns := s.UDPFronts()[0]
	// A UDP session asked once is open; asked twice it has its
	// `responses` and ends.
	askUDP := func(c *net.UDPConn) {
		t.Helper()
		if got, err := askOnce(c, []byte("q"), 20*time.Second); err != nil || string(got) != "q" {
			t.Fatalf("UDP reply %q, %v", got, err)
		}
	}
	openTCP := func() tcpPair { return openVia(t, tcpBind, k) }
	// end closes a TCP connection and ends a UDP session, and waits until
	// their loops have done with them (their records pushed, if any).
	var ended int64
	end := func(p tcpPair, c *net.UDPConn) (tcpClient, udpClient string) {
		t.Helper()
		tcpClient, udpClient = p.client.LocalAddr().String(), c.LocalAddr().String()
		p.client.Close()
		p.backend.Close()
		askUDP(c)
		ended++
		testnet.Eventually(t, "the connection and the session to end", func() bool {
			return s.Closes()[0].Closed[relay.CloseCompleted] == ended && dns.Ended[udpsession.EndResponses].Load() == ended
		})
		l.barrier()
		return tcpClient, udpClient
	}

	beganOn, beganOnUDP := openTCP(), udpClient(t, udpBind)
	askUDP(beganOnUDP)
	reload(false)
	var silent []string
	t1, u1 := end(beganOn, beganOnUDP) // began on, ends off
	silent = append(silent, t1, u1)
	whileOff, whileOffUDP := openTCP(), udpClient(t, udpBind)
	askUDP(whileOffUDP)
	t2, u2 := end(whileOff, whileOffUDP) // began and ended off
	silent = append(silent, t2, u2)
	beganOff, beganOffUDP := openTCP(), udpClient(t, udpBind)
	askUDP(beganOffUDP)
	reload(true)
	t3, u3 := end(beganOff, beganOffUDP) // began off, ends on
	after, afterUDP := openTCP(), udpClient(t, udpBind)
	askUDP(afterUDP)
	t4, u4 := end(after, afterUDP)
	for _, client := range []string{t3, u3, t4, u4} {
		if m := lineFor(t, buf, client); m["event"] != "close" {
			t.Errorf("client %s: line %v, want its close line", client, m)
		}
	}
	// The loops pushed the silent ones' records, if any, before these.
	for _, m := range jsonLines(t, buf) {
		for _, client := range silent {
			if m["client"] == client {
				t.Errorf("client %s ended while its listener was out of the access log, and wrote %v", client, m)
			}
		}
	}
}

// A reload that moves a TCP listener to another address (a removed
// listener and a new one of its name) carries its access_log to the
// connections the old address accepted, at this reload and at every later
// one: they follow the listener of their name as a kept one's do.
func TestReloadMovedListenerCarriesAccessLog(t *testing.T) {
	noLeaks(t)
	k := testnet.StartTaker(t)
	first, moved := testnet.FreeAddr(t), testnet.FreeAddr(t)
	for moved == first {
		moved = testnet.FreeAddr(t)
	}
	text := func(bind string, accessLog bool) string {
		return fmt.Sprintf("[admin]\nlisten = \"\"\n[[listener]]\nname = \"web\"\nbind = %q\npool = \"web\"\naccess_log = %v\n"+
			"[pool.web]\n[pool.web.health]\nenabled = false\n[[pool.web.backend]]\naddr = %q\n", bind, accessLog, k.Addr)
	}
	l := startLB(t, text(first, true), 0)
	s := l.server
	_, buf := startAccessLog(t, s, "json")
	reload := func(bind string, accessLog bool, want ReloadStats) {
		t.Helper()
		cfg, err := config.Parse("test.toml", []byte(text(bind, accessLog)))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := s.Reload(l.frontends(t, cfg), ConnCap{MaxConnections: 100}); err != nil || st != want {
			t.Fatalf("reload to %s, access_log = %v: %+v, %v; want %+v", bind, accessLog, st, err, want)
		}
	}
	end := func(p tcpPair) string {
		t.Helper()
		client := p.client.LocalAddr().String()
		open := s.Active()
		p.client.Close()
		p.backend.Close()
		testnet.Eventually(t, "the connection to end", func() bool { return s.Active() == open-1 })
		l.barrier() // its record pushed, if any
		return client
	}

	a1, a2 := openVia(t, first, k), openVia(t, first, k)
	reload(moved, false, ReloadStats{Added: 1, Removed: 1})
	silent := end(a1) // accepted at the old address, ends while web is out of the log
	reload(moved, true, ReloadStats{Kept: 1})
	logged := end(a2) // and ends once web is back, a reload later
	if m := lineFor(t, buf, logged); m["event"] != "close" {
		t.Errorf("client %s: line %v, want its close line", logged, m)
	}
	for _, m := range jsonLines(t, buf) {
		if m["client"] == silent {
			t.Errorf("client %s ended while its moved listener was out of the access log, and wrote %v", silent, m)
		}
	}
}

// tcpPair is a client connection through l4lb and its backend's end.
type tcpPair struct{ client, backend *net.TCPConn }

// openVia opens a connection through addr to the taker k, open once 4
// bytes crossed it.
func openVia(t *testing.T, addr string, k *testnet.Taker) tcpPair {
	t.Helper()
	p := tcpPair{client: dial(t, addr)}
	p.backend = k.Next(t)
	p.client.Write([]byte("ping"))
	p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(p.backend, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	return p
}
