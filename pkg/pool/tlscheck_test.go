package pool_test

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/health"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxyproto"
)

// opensslServer is openssl s_server serving HTTPS (-www) with a
// certificate on a free port of 127.0.0.1, until stop (or the test's end).
type opensslServer struct {
	addr    string
	outPath string // its standard output and error
	stop    func()
}

// output is what the server has written so far.
func (s *opensslServer) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.outPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func startOpensslServer(t *testing.T, certPath, keyPath string) *opensslServer {
	t.Helper()
	bin := testnet.NeedTool(t, "openssl", "openssl")
	s := &opensslServer{addr: testnet.FreeAddr(t), outPath: filepath.Join(t.TempDir(), "s_server.out")}
	out, err := os.Create(s.outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the child has its own
	cmd := exec.Command(bin, "s_server", "-accept", s.addr, "-cert", certPath, "-key", keyPath, "-www")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(s.stop)
	testnet.Eventually(t, "openssl s_server to listen", func() bool { return strings.Contains(s.output(t), "ACCEPT") })
	return s
}

// A tls check against a real TLS server, openssl's: it passes, leaving no
// error in the server's output (a bare TCP connect leaves "unexpected
// eof while reading" there); a server_name the certificate does not name
// fails with the x509 error as the cause in the backend's health status;
// and once the server stops, the check fails refused.
func TestTLSHealthCheckAgainstOpenSSL(t *testing.T) {
	cert := testnet.SelfSignedCert(t, "backend.test")
	certPath, keyPath := cert.WriteFiles(t, t.TempDir(), "backend")
	srv := startOpensslServer(t, certPath, keyPath)

	p := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthTLS, ServerName: "backend.test", CAFile: certPath}, srv.addr)
	b := p.Backends()[0]
	testnet.Eventually(t, "three passing tls checks", func() bool {
		ok, _ := b.Dials(pool.DialHealth)
		st, _ := b.HealthStatus()
		return ok >= 3 && b.HealthUp() && st.LastResult == health.Pass
	})
	if out := srv.output(t); strings.Contains(out, "error") {
		t.Fatalf("the passing checks left errors in openssl's output:\n%s", out)
	}

	wrong := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthTLS, ServerName: "other.test", CAFile: certPath}, srv.addr)
	wb := wrong.Backends()[0]
	const x509Cause = "tls handshake: tls: failed to verify certificate: x509: certificate is valid for backend.test, not other.test"
	testnet.Eventually(t, "the check of a name the certificate lacks to fail", func() bool {
		st, _ := wb.HealthStatus()
		return !wb.HealthUp() && st.LastResult == health.Fail && strings.Contains(st.LastError, x509Cause)
	})

	srv.stop()
	testnet.Eventually(t, "the stopped server's backend to go health-down, refused", func() bool {
		st, _ := b.HealthStatus()
		return !b.HealthUp() && strings.Contains(st.LastError, "connection refused")
	})
}

// A tls check goes to the health port when one is set, like a connect
// check: the backend's own port here refuses.
func TestTLSHealthCheckPort(t *testing.T) {
	cert := testnet.SelfSignedCert(t, "backend.test")
	certPath, keyPath := cert.WriteFiles(t, t.TempDir(), "backend")
	srv := startOpensslServer(t, certPath, keyPath)
	_, port, _ := strings.Cut(srv.addr, ":")
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	p := checkPool(t, config.ProtocolTCP, config.Health{Type: config.HealthTLS, ServerName: "backend.test", Port: n}, testnet.FreeAddr(t))
	b := p.Backends()[0]
	testnet.Eventually(t, "a passing tls check on the health port", func() bool {
		ok, _ := b.Dials(pool.DialHealth)
		return ok > 0
	})
}

// A pool built without the parser is held to what the parser refuses.
func TestTLSHealthCheckKinds(t *testing.T) {
	for _, tc := range []struct {
		protocol, serverName, want string
	}{
		{config.ProtocolUDP, "backend.test", "tls health checks are for TCP pools"},
		{config.ProtocolTCP, "", "a tls health check needs a server_name"},
	} {
		cfg := config.DefaultPool("p")
		cfg.Protocol = tc.protocol
		cfg.Health.Type, cfg.Health.ServerName = config.HealthTLS, tc.serverName
		bc := config.DefaultBackend()
		bc.Addr = "127.0.0.1:1"
		cfg.Backends = []config.Backend{bc}
		if _, err := pool.New(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil)}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s pool, server_name %q: New = %v, want %q", tc.protocol, tc.serverName, err, tc.want)
		}
	}
}

// A tls check of a pool whose backends expect a PROXY header sends a
// LOCAL v2 one before its ClientHello: the backend reads the header, then
// makes the handshake. The pool is parsed from TOML, as a file gives it.
func TestTLSHealthCheckSendsLocalHeaderFirst(t *testing.T) {
	cert := testnet.SelfSignedCert(t, "backend.test")
	var handshakes atomic.Int64
	ln := serveEach(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		var hdr [16]byte // a v2 LOCAL header is its fixed part alone
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		if h, n, err := proxyproto.Parse(hdr[:]); err != nil || !h.Local || n != len(hdr) {
			t.Errorf("the check led with % x: %+v, %v; want a LOCAL v2 header", hdr, h, err)
			return
		}
		conn := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert.Cert}})
		if conn.Handshake() == nil {
			handshakes.Add(1)
			io.Copy(io.Discard, conn)
		}
	})
	clk := clock.NewFake(time.Now())
	p := newPoolOn(t, clk, []string{ln.Addr().String()},
		"proxy_protocol = \"v2\"\n[pool.p.health]\ntype = \"tls\"\nserver_name = \"backend.test\"\ninterval = \"1s\"\ntimeout = \"1s\"\n")
	b := p.Backends()[0]
	testnet.EventuallyOn(t, clk, 100*time.Millisecond, "two passing tls checks behind a header", func() bool {
		st, _ := b.HealthStatus()
		return handshakes.Load() >= 2 && st.LastResult == health.Pass
	})
}
