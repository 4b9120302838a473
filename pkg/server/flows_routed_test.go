package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
)

// routedTOML is a listener whose own pool has a dead backend and whose one
// route sends api.example.com to pool api, at backend: a pool only the
// route reaches.
func routedTOML(t *testing.T, backend string) string {
	t.Helper()
	return fmt.Sprintf(`[admin]
listen = ""
[[listener]]
name = "edge"
bind = %q
pool = "fallback"
[[listener.route]]
name = "api"
sni = ["api.example.com"]
pool = "api"
[pool.fallback]
[pool.fallback.health]
enabled = false
[[pool.fallback.backend]]
addr = %q
[pool.api]
[pool.api.health]
enabled = false
[[pool.api.backend]]
addr = %q
`, testnet.FreeAddr(t), testnet.FreeAddr(t), backend)
}

// A routed client whose pool no listener names (only its route does) is
// handed over like any other, and taken back like any other when the new
// process refuses it: before, both processes looked for its pool among
// the listeners' own pools only, refused it, and reset it.
func TestServerHandsARoutedConnectionOverWhenOnlyARouteReachesItsPool(t *testing.T) {
	k := testnet.StartTaker(t)
	old := startLB(t, routedTOML(t, k.Addr), 0)
	next := startLB(t, routedTOML(t, k.Addr), 0)

	hello := testnet.GoClientHello(t, &tls.Config{ServerName: "api.example.com", InsecureSkipVerify: true})
	c, err := net.DialTimeout("tcp", old.addr, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	b := k.Next(t)
	defer b.Close()
	b.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, len(hello))
	if _, err := io.ReadFull(b, got); err != nil || string(got) != string(hello) {
		t.Fatalf("the api backend read %d bytes of the ClientHello, %v", len(got), err)
	}
	echoVia(t, c, b, "before")

	batch := &flow.Batch{}
	old.server.DetachFlows(batch)
	if len(batch.Relays) != 1 || batch.Relays[0].Pool != "api" || batch.Relays[0].Route != "api" {
		t.Fatalf("detached %+v, want one relay of pool api, route api", batch.Relays)
	}
	handTo(t, next, batch)
	echoVia(t, c, b, "on the next one")
	if got := next.pools["api"].Backends()[0].Active(); got != 1 {
		t.Errorf("the api backend counts %d connections on the next server, want 1", got)
	}

	// Taken back by the process that passed it (the new one refused it),
	// as the old process of an upgrade does.
	batch = &flow.Batch{}
	next.server.DetachFlows(batch)
	run, refused := next.server.AdoptFlows(batch, true)
	run()
	if refused.Len() != 0 {
		t.Fatalf("a server refused its own routed client back: %+v", refused)
	}
	echoVia(t, c, b, "kept")
}

// A client refused for want of a backend of its route's pool is logged
// under that pool, not the listener's own (which has backends to spare).
func TestRoutedClientsRefusalNamesItsRoutesPool(t *testing.T) {
	var buf testnet.LogBuffer
	l := startLBLogged(t, routedTOML(t, testnet.FreeAddr(t)), 0, slog.New(slog.NewTextHandler(&buf, nil)))
	c, err := net.DialTimeout("tcp", l.addr, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(testnet.GoClientHello(t, &tls.Config{ServerName: "api.example.com", InsecureSkipVerify: true})); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a client of a pool without a live backend was served")
	}
	testnet.Eventually(t, "the refusal logged", func() bool { return buf.Count("no backend could be reached") == 1 })
	if !strings.Contains(buf.String(), "listener=edge pool=api refused=1") {
		t.Errorf("the refusal does not name the route's pool:\n%s", buf.String())
	}
}
