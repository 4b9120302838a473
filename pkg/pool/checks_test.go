package pool_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The health check and the breaker's recovery probe by protocol and health
// type, on real sockets. The pools are built from config.Pool values
// directly and driven through the pool's public API: the data path's
// BeginDial/Await/Settle for the failures that trip a breaker, Probe for
// the recovery probe.

// checkPool is pool "p" of protocol over backends with health h (checks
// every 20ms, rise and fall 1), a breaker that trips on one failure and
// whose cooldown never runs out during a test (probes come on request or
// by readmission only), run until the test ends.
func checkPool(t *testing.T, protocol string, h config.Health, backends ...string) *pool.Pool {
	t.Helper()
	testnet.CheckLeaks(t)
	cfg := config.DefaultPool("p")
	cfg.Protocol = protocol
	cfg.Retries = 0
	h.Enabled = true
	h.Interval, h.Timeout, h.Rise, h.Fall = 20*time.Millisecond, 5*time.Second, 1, 1
	cfg.Health = h
	cfg.Breaker.Failures = 1
	cfg.Breaker.Cooldown = time.Hour
	cfg.Breaker.MaxCooldown = 4 * time.Hour
	for _, a := range backends {
		bc := config.DefaultBackend()
		bc.Addr = a
		cfg.Backends = append(cfg.Backends, bc)
	}
	return runPool(t, &config.Config{Pools: map[string]*config.Pool{"p": cfg}})
}

// trip records one failed dial of b, as the data path does for a UDP
// session's first datagram refused, which opens a breaker with failures = 1.
func trip(t *testing.T, p *pool.Pool, b *pool.Backend) {
	t.Helper()
	d := p.BeginDial(b, false)
	p.Await(d).Settle(dialer.Failure)
	p.EndRelay(b)
	if !b.Breaker().Open {
		t.Fatalf("a failed dial with failures = 1 left the breaker %+v", b.Breaker())
	}
}

// probe asks for b's recovery probe; a breaker that readmission closed
// meanwhile has nothing to probe, which is fine.
func probe(t *testing.T, p *pool.Pool, b *pool.Backend) {
	t.Helper()
	if err := p.Probe(context.Background(), b); err != nil && !errors.Is(err, pool.ErrBreakerClosed) {
		t.Fatal(err)
	}
}

// udpBackend is a UDP echo server that can be stopped and started again on
// the same address.
type udpBackend struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	conn *net.UDPConn
	wg   sync.WaitGroup
}

func newUDPBackend(t *testing.T) *udpBackend {
	t.Helper()
	testnet.CheckLeaks(t) // first, so the stop below runs before the check
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	u := &udpBackend{t: t, addr: c.LocalAddr().String()}
	u.serve(c)
	t.Cleanup(u.stop)
	return u
}

func (u *udpBackend) start() {
	a, err := net.ResolveUDPAddr("udp", u.addr)
	if err != nil {
		u.t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", a)
	if err != nil {
		u.t.Fatal(err)
	}
	u.serve(c)
}

func (u *udpBackend) serve(c *net.UDPConn) {
	u.mu.Lock()
	u.conn = c
	u.mu.Unlock()
	u.wg.Go(func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			c.WriteToUDP(buf[:n], from)
		}
	})
}

// stop closes the socket: datagrams to the address are refused (ICMP port
// unreachable) until start.
func (u *udpBackend) stop() {
	u.mu.Lock()
	if u.conn != nil {
		u.conn.Close()
		u.conn = nil
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// A UDP pool with a send-expect check: a dead backend goes health-down,
// its breaker's probe (the same request) fails on the refusal, and passes
// once the backend is back.
func TestUDPSendExpectHealthAndProbe(t *testing.T) {
	back := newUDPBackend(t)
	p := checkPool(t, config.ProtocolUDP, config.Health{Type: config.HealthSendExpect, Send: []byte("\x00ping"), Expect: []byte("\x00pi")}, back.addr)
	b := p.Backends()[0]
	testnet.Eventually(t, "a passing health check", func() bool { ok, _ := b.Dials(pool.DialHealth); return ok > 0 })

	back.stop()
	testnet.Eventually(t, "the dead backend to go health-down", func() bool { return !b.HealthUp() })
	if _, failed := b.Dials(pool.DialHealth); failed == 0 {
		t.Fatal("health-down without a failed health dial counted")
	}

	trip(t, p, b)
	gen := b.Breaker().Generation
	probe(t, p, b)
	testnet.Eventually(t, "the probe to fail on the refusal", func() bool { return b.ProbeFailures() == 1 })
	if st := b.Breaker(); !st.Open || st.Generation != gen+1 {
		t.Fatalf("after a failed probe: %+v, want re-opened at generation %d", st, gen+1)
	}
	if ok, failed := b.Dials(pool.DialProbe); ok != 0 || failed != 1 {
		t.Fatalf("probe dials %d ok, %d failed; want the one failure", ok, failed)
	}

	back.start()
	testnet.Eventually(t, "health checks to see the backend back", b.HealthUp)
	probe(t, p, b)
	testnet.Eventually(t, "a probe to close the breaker", func() bool { return !b.Breaker().Open })
	if ok, failed := b.Dials(pool.DialProbe); ok != 1 || failed != 1 || b.ProbeFailures() != 1 {
		t.Fatalf("probe dials %d ok, %d failed (alerts %d); want one of each", ok, failed, b.ProbeFailures())
	}
	testnet.Eventually(t, "the backend to be usable", b.Usable)
}

// A UDP pool with connect checks: they are TCP connects to the health
// port, and its breaker probes with one empty datagram, failing only when
// refused. The probe alone decides the breaker: here it closes while the
// health port is still down.
func TestUDPConnectHealthAndRefusalProbe(t *testing.T) {
	back := newUDPBackend(t)
	hp := newRestartable(t) // the TCP service beside the UDP one
	hp.start()
	_, port, _ := net.SplitHostPort(hp.addr)
	n, _ := strconv.Atoi(port)
	p := checkPool(t, config.ProtocolUDP, config.Health{Type: config.HealthConnect, Port: n}, back.addr)
	b := p.Backends()[0]
	testnet.Eventually(t, "a connect to the health port", func() bool { return hp.accepted() > 0 })
	if !b.HealthUp() {
		t.Fatal("health-down while the health port accepts")
	}

	back.stop()
	hp.stop()
	testnet.Eventually(t, "the backend to go health-down", func() bool { return !b.HealthUp() })
	trip(t, p, b)
	probe(t, p, b)
	testnet.Eventually(t, "the refusal probe to fail", func() bool { return b.ProbeFailures() == 1 })
	if !b.Breaker().Open {
		t.Fatalf("a refused probe closed the breaker: %+v", b.Breaker())
	}

	back.start() // the UDP service only: health checks still fail
	probe(t, p, b)
	testnet.Eventually(t, "the refusal probe to pass and close", func() bool { return !b.Breaker().Open })
	if ok, failed := b.Dials(pool.DialProbe); ok != 1 || failed != 1 {
		t.Fatalf("probe dials %d ok, %d failed; want one of each", ok, failed)
	}
	if b.HealthUp() || b.Usable() {
		t.Fatal("usable while the health port refuses")
	}
	hp.start()
	testnet.Eventually(t, "the backend to be usable", b.Usable)
}

// A UDP pool's connect check with port 0 is a TCP connect to the
// backend's own port number.
func TestUDPConnectHealthOnTheBackendsPort(t *testing.T) {
	tcp := newRestartable(t)
	tcp.start()
	p := checkPool(t, config.ProtocolUDP, config.Health{Type: config.HealthConnect}, tcp.addr)
	b := p.Backends()[0]
	testnet.Eventually(t, "a TCP connect to the backend's port", func() bool { return tcp.accepted() > 0 })
	tcp.stop()
	testnet.Eventually(t, "the backend to go health-down", func() bool { return !b.HealthUp() })
}

// The TCP pool's checks: a backend that accepts and closes at once passes
// connect checks and fails send-expect ones; a health port moves the
// connect check away from the backend's address.
func TestTCPHealthTypes(t *testing.T) {
	acceptClose := newRestartable(t) // sends its address, then closes
	acceptClose.start()
	dead := testnet.FreeAddr(t)

	t.Run("connect passes accept-and-close", func(t *testing.T) {
		p := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthConnect}, acceptClose.addr)
		b := p.Backends()[0]
		testnet.Eventually(t, "passing checks", func() bool { ok, _ := b.Dials(pool.DialHealth); return ok >= 3 })
		if _, failed := b.Dials(pool.DialHealth); failed != 0 || !b.HealthUp() {
			t.Fatalf("%d failed connect checks (up %v), want none", failed, b.HealthUp())
		}
	})
	t.Run("send-expect fails accept-and-close", func(t *testing.T) {
		// The backend's line is its address; expecting more than that
		// reads to its close.
		p := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthSendExpect, Send: []byte("hi\n"), Expect: []byte(acceptClose.addr + "\nmore")}, acceptClose.addr)
		b := p.Backends()[0]
		testnet.Eventually(t, "the backend to go health-down", func() bool { return !b.HealthUp() })
		if ok, _ := b.Dials(pool.DialHealth); ok != 0 {
			t.Fatalf("%d passing send-expect checks counted, want none", ok)
		}
	})
	t.Run("send-expect passes the expected line", func(t *testing.T) {
		p := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthSendExpect, Expect: []byte(acceptClose.addr + "\n")}, acceptClose.addr)
		b := p.Backends()[0]
		testnet.Eventually(t, "passing checks", func() bool { ok, _ := b.Dials(pool.DialHealth); return ok >= 3 })
		if _, failed := b.Dials(pool.DialHealth); failed != 0 || !b.HealthUp() {
			t.Fatalf("%d failed send-expect checks (up %v), want none", failed, b.HealthUp())
		}
	})
	t.Run("connect goes to the health port", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(acceptClose.addr)
		n, _ := strconv.Atoi(port)
		p := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthConnect, Port: n}, dead)
		b := p.Backends()[0]
		testnet.Eventually(t, "passing checks", func() bool { ok, _ := b.Dials(pool.DialHealth); return ok >= 3 })
		if _, failed := b.Dials(pool.DialHealth); failed != 0 || !b.HealthUp() {
			t.Fatalf("%d failed checks of the health port (up %v), want none", failed, b.HealthUp())
		}
	})
}

func TestNewRejectsUnknownCheckKinds(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(*config.Pool)
	}{
		{"protocol", "sctp", func(c *config.Pool) { c.Protocol = "sctp" }},
		{"health type", "ping", func(c *config.Pool) { c.Health.Type = "ping" }},
		{"health port", "70000", func(c *config.Pool) { c.Health.Port = 70000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.DefaultPool("p")
			bc := config.DefaultBackend()
			bc.Addr = "127.0.0.1:9"
			cfg.Backends = []config.Backend{bc}
			tc.edit(cfg)
			_, err := pool.New(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
