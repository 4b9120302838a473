package admin

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/server"
)

// /metrics carries build info, closes by reason (every reason, 0 or not),
// the connect-time histogram per backend, the access log's drops, and the
// event loops' own series.
func TestObservabilityMetrics(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	pc := config.DefaultPool("web")
	pc.Health.Enabled = false
	b := config.DefaultBackend()
	b.Addr = be.Addr
	pc.Backends = []config.Backend{b}
	p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Loops: 2, MaxConnections: 10, Frontends: []server.Frontend{{Name: "front", Bind: "127.0.0.1:0", Pool: p}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	addr, _ := s.Addr("front")
	const clients = 3
	for range clients {
		if tag, err := testnet.Hello(addr.String(), ""); err != nil || tag != "b" {
			t.Fatalf("%q, %v", tag, err)
		}
	}
	// The loops count a client until they have seen it end.
	testnet.Eventually(t, "the three clients to end", func() bool { return s.Active() == 0 })
	// And one client reset.
	c, err := net.DialTCP("tcp", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(c).ReadString('\n')
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}, Server: s, MaxConnections: 10, Version: "v1.2.3+abc"}, "", nil))
	defer srv.Close()
	// While it relays, the loop that holds it counts it.
	if n := loopConnections(t, srv.URL); n != 1 {
		t.Fatalf("l4lb_loop_connections sum to %d with one client relaying, want 1", n)
	}
	c.SetLinger(0)
	c.Close()
	testnet.Eventually(t, "every client to end", func() bool {
		return s.Active() == 0 && s.Closes()[0].Closed[relay.CloseClientReset] == 1
	})

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(raw)
	series := []string{
		`l4lb_build_info{goversion="` + runtime.Version() + `",version="v1.2.3+abc"} 1`,
		`l4lb_client_connections_closed_total{listener="front",reason="completed"} 3`,
		`l4lb_client_connections_closed_total{listener="front",reason="client_reset"} 1`,
		`l4lb_access_log_dropped_total 0`,
		`l4lb_backend_connect_seconds_bucket{backend="` + be.Addr + `",pool="web",le="5"} 4`,
		`l4lb_backend_connect_seconds_bucket{backend="` + be.Addr + `",pool="web",le="+Inf"} 4`,
		`l4lb_backend_connect_seconds_count{backend="` + be.Addr + `",pool="web"} 4`,
	}
	for r := range relay.NumCloseReasons {
		if r != relay.CloseCompleted && r != relay.CloseClientReset {
			series = append(series, `l4lb_client_connections_closed_total{listener="front",reason="`+r.String()+`"} 0`)
		}
	}
	for _, le := range []string{"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5"} {
		if !strings.Contains(body, `l4lb_backend_connect_seconds_bucket{backend="`+be.Addr+`",pool="web",le="`+le+`"} `) {
			t.Errorf("/metrics lacks the connect-time bucket le=%s", le)
		}
	}
	for _, want := range series {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Per loop (two here): every client has ended, and both loops have
	// waited for their first events.
	for _, id := range []string{"0", "1"} {
		if !strings.Contains(body, "\nl4lb_loop_connections{loop=\""+id+"\"} 0\n") {
			t.Errorf("/metrics lacks loop %s's connections at 0", id)
		}
		for _, name := range []string{"l4lb_loop_busy_seconds_total", "l4lb_loop_events_total", "l4lb_loop_sleeps_total", "l4lb_loop_coalesced_waits_total"} {
			if !strings.Contains(body, "\n"+name+"{loop=\""+id+"\"} ") {
				t.Errorf("/metrics lacks %s for loop %s", name, id)
			}
		}
	}
	if strings.Contains(body, `l4lb_loop_sleeps_total{loop="0"} 0`+"\n") && strings.Contains(body, `l4lb_loop_sleeps_total{loop="1"} 0`+"\n") {
		t.Error("neither loop counted a sleep, though both served and waited")
	}
	if !strings.Contains(body, "# TYPE l4lb_backend_connect_seconds histogram") {
		t.Error("l4lb_backend_connect_seconds is not a histogram")
	}
	if !strings.Contains(body, `l4lb_backend_connect_seconds_sum{backend="`+be.Addr+`",pool="web"} `) {
		t.Error("/metrics lacks the connect-time sum")
	}
}

// loopConnections is the sum of l4lb_loop_connections over every loop.
func loopConnections(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	sum := 0
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "l4lb_loop_connections{"); ok {
			_, v, _ := strings.Cut(strings.TrimSpace(rest), "} ")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("l4lb_loop_connections line %q: %v", line, err)
			}
			sum += n
		}
	}
	return sum
}
