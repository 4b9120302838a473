package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// A reload that flips access_log applies to each record as it is written:
// a TCP connection or UDP session that ends while its listener is out of
// the access log writes no line, wherever it began; one that ends after
// the listener is back writes its close line, though it began while out.
// Built from the configuration as l4lb builds it (Frontends), both
// protocols.
func TestReloadFlipsAccessLog(t *testing.T) {
	noLeaks(t)
	k := testnet.StartTaker(t)
	echo := testnet.StartUDPBackend(t, "u", "")
	tcpBind, udpBind := testnet.FreeAddr(t), fmt.Sprintf("127.0.0.1:%d", freeUDPPort(t, "udp4", "127.0.0.1"))
	parse := func(accessLog bool) *config.Config {
		t.Helper()
		text := fmt.Sprintf(`[admin]
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
		cfg, err := config.Parse("test.toml", []byte(text))
		if err != nil {
			t.Fatalf("config:\n%s\n%v", text, err)
		}
		return cfg
	}
	cfg := parse(true)
	pools := map[string]*pool.Pool{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range cfg.PoolNames {
		p, err := pool.New(cfg.Pools[name], pool.Deps{Store: breaker.NewMemoryStore(nil)})
		if err != nil {
			t.Fatal(err)
		}
		pools[name] = p
		wg.Go(func() { p.Run(ctx) })
	}
	fronts := func(cfg *config.Config) []Frontend {
		t.Helper()
		f, err := Frontends(cfg, pools, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	s, err := New(Config{Frontends: fronts(cfg), Loops: 2, MaxConnections: 100})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		s.Shutdown(sctx)
		cancel()
		wg.Wait()
	})
	_, buf := startAccessLog(t, s, "json")
	reload := func(accessLog bool) {
		t.Helper()
		if st, err := s.Reload(fronts(parse(accessLog)), 100); err != nil || st.Kept != 2 {
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
	// A TCP connection through web is open once 4 bytes crossed it.
	type tcpPair struct{ client, backend *net.TCPConn }
	openTCP := func() tcpPair {
		t.Helper()
		p := tcpPair{client: dial(t, tcpBind)}
		p.backend = k.Next(t)
		p.client.Write([]byte("ping"))
		p.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(p.backend, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		return p
	}
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
		for _, l := range s.loops {
			l.Do(func() {})
		}
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
