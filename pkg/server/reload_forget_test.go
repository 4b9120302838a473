package server

// What a reload leaves behind once the listeners it removed are gone;
// newUDPPool and udpEcho also serve the UDP tests.

import (
	"net"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// A listener a reload removes is forgotten once its connections are
// gone: nothing of the server keeps it (and through it the pool it fed)
// alive, so reloads that add and remove listeners do not grow the
// process without bound.
func TestReloadForgetsRemovedListeners(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	r := startRecorder(t)
	text := poolTOML(t, "round-robin", []string{b.Addr}, "")
	l := startLB(t, text, 0)
	p := l.pools["p"]
	udpPool := newUDPPool(t, r.addr())
	front := Frontend{Name: "front", Bind: l.addr, Pool: p}
	extraTCP := Frontend{Name: "extra", Bind: testnet.FreeAddr(t), Pool: p}
	extraUDP := Frontend{Name: "dns", Bind: testnet.FreeAddr(t), Protocol: "udp", Pool: udpPool,
		SessionTimeout: time.Minute, MaxSessions: 16}

	var tcpGone []weak.Pointer[relay.Front]
	var udpGone []weak.Pointer[udpsession.Front]
	for range 3 {
		if _, err := l.server.Reload([]Frontend{front, extraTCP, extraUDP}, ConnCap{MaxConnections: 100}); err != nil {
			t.Fatal(err)
		}
		// One client through each added listener, so they served.
		if _, err := testnet.Hello(extraTCP.Bind, ""); err != nil {
			t.Fatal(err)
		}
		udpEcho(t, extraUDP.Bind)
		l.server.mu.RLock()
		for _, f := range l.server.fronts {
			if f.Name == "extra" {
				tcpGone = append(tcpGone, weak.Make(f.Front))
			}
		}
		for _, f := range l.server.udpFronts {
			udpGone = append(udpGone, weak.Make(f.Front))
		}
		l.server.mu.RUnlock()
		if _, err := l.server.Reload([]Frontend{front}, ConnCap{MaxConnections: 100}); err != nil {
			t.Fatal(err)
		}
	}
	testnet.Eventually(t, "the removed listeners to be collected", func() bool {
		runtime.GC()
		for _, w := range tcpGone {
			if w.Value() != nil {
				return false
			}
		}
		// The latest UDP one may stay referenced from a loop's send
		// scratch (pkg/udpsession's udpOut) until that loop sends again: one per
		// loop, not one per reload.
		for _, w := range udpGone[:len(udpGone)-1] {
			if w.Value() != nil {
				return false
			}
		}
		return true
	})
}

// newUDPPool is a UDP pool over one backend, without health checks.
func newUDPPool(t *testing.T, backend string) *pool.Pool {
	t.Helper()
	pc := config.DefaultPool("u")
	pc.Protocol = config.ProtocolUDP
	pc.Health.Enabled = false
	bc := config.DefaultBackend()
	bc.Addr = backend
	pc.Backends = append(pc.Backends, bc)
	p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// udpEcho sends one datagram to addr and waits for its echo.
func udpEcho(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatalf("no echo through %s", addr)
		}
		c.Write([]byte("ping"))
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(buf); err == nil && string(buf[:n]) == "ping" {
			return
		}
	}
}
