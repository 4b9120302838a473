package admin

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
)

func TestUDPMetricsAndPoolProtocol(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	pc := config.DefaultPool("dns")
	pc.Protocol = config.ProtocolUDP
	pc.Health.Enabled = false
	b := config.DefaultBackend()
	b.Addr = be.Addr
	pc.Backends = []config.Backend{b}
	p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Loops: 1, MaxConnections: 10, Frontends: []server.Frontend{{
		Name: "dns", Bind: "127.0.0.1:0", Protocol: "udp", Pool: p, SessionTimeout: time.Minute, MaxSessions: 10,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	ua, _ := s.UDPAddr("dns")
	c, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	testnet.Eventually(t, "an echo through the UDP listener", func() bool {
		c.Write([]byte("hello"))
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		return err == nil && string(buf[:n]) == "hello"
	})
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, Server: s, MaxConnections: 10}, "", nil))
	defer srv.Close()
	scrape := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	var body string
	testnet.Eventually(t, "counters flushed", func() bool {
		body = scrape("/metrics")
		return strings.Contains(body, "\n"+`l4lb_udp_datagrams_total{direction="to_client",listener="dns"} `)
	})
	sent := be.Received()
	for _, series := range []string{
		`l4lb_udp_sessions_active{listener="dns"} 1`,
		`l4lb_udp_sessions_total{listener="dns",result="timeout"} 0`,
		`l4lb_udp_sessions_total{listener="dns",result="evicted"} 0`,
		`l4lb_udp_drops_total{listener="dns",reason="no_backend"} 0`,
		`l4lb_udp_drops_total{listener="dns",reason="loop"} 0`,
		`l4lb_udp_unanswered_total{listener="dns"} 0`,
		`l4lb_connections_active{backend="` + be.Addr + `",pool="dns"} 1`,
	} {
		if !strings.Contains(body, "\n"+series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if want := `l4lb_udp_datagrams_total{direction="to_backend",listener="dns"} ` + itoa(sent); !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s (the backend received %d)", want, sent)
	}
	if want := `l4lb_udp_bytes_total{direction="to_backend",listener="dns"} ` + itoa(5*sent); !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if js := scrape("/api/v1/pools"); !strings.Contains(js, `"protocol":"udp"`) {
		t.Errorf("pools JSON does not say the pool is UDP: %s", js)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
