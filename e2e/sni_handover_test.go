package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// An upgrade hands routed TLS connections over like any other, whatever
// pool their route chose: keep-alive HTTPS sessions to nginx, one per
// route and one with no server name, each answer the next request after
// the upgrade on the same TLS session (so not a byte was lost or reset),
// from the backend its route chose. Before, a client whose pool only a
// route names was refused by the new process and by the old, and reset.
func TestUpgradeKeepsRoutedTLSConnections(t *testing.T) {
	testnet.CheckLeaks(t)
	backends := startHTTPSBackends(t, "api.example.test", "web.example.test", "fallback.example.test")
	edge := testnet.FreeAddr(t)
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = \"\"\n[global]\nshutdown_timeout = \"2s\"\n")
	fmt.Fprintf(&b, "[[listener]]\nname = \"edge\"\nbind = %q\npool = \"fallback\"\ninspect_timeout = \"20s\"\n", edge)
	b.WriteString("[[listener.route]]\nsni = [\"api.example.test\"]\npool = \"api\"\n[[listener.route]]\nsni = [\"*.example.test\"]\npool = \"web\"\n")
	for pool, addr := range map[string]string{"api": backends["api.example.test"], "web": backends["web.example.test"], "fallback": backends["fallback.example.test"]} {
		fmt.Fprintf(&b, "[pool.%s]\n[pool.%s.health]\nenabled = false\n[[pool.%s.backend]]\naddr = %q\n", pool, pool, pool, addr)
	}
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	chain := startChain(t, l4lbBin, path)

	sessions := []*httpsSession{
		openHTTPS(t, edge, "api.example.test", "api.example.test"),
		openHTTPS(t, edge, "www.example.test", "web.example.test"),
		openHTTPS(t, edge, "", "fallback.example.test"),
	}
	for _, s := range sessions {
		s.get(t, "before the upgrade")
	}
	old, served := chain.upgrade(t)
	waitOldGone(t, old, served)
	for _, s := range sessions {
		s.get(t, "after the upgrade, the old process gone")
	}
	checkHandedOver(t, chain.logText(), 1, len(sessions), 0)
	if log := chain.logText(); strings.Contains(log, "neither process could carry on") || strings.Contains(log, "refused in a hand-over") {
		t.Errorf("the upgrade refused a routed connection:\n%s", log)
	}
}

// httpsSession is one keep-alive HTTPS connection through l4lb, to the
// backend whose certificate and answer are want.
type httpsSession struct {
	tc   *tls.Conn
	r    *bufio.Reader
	host string
	want string
}

func openHTTPS(t *testing.T, addr, serverName, want string) *httpsSession {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	t.Cleanup(func() { tc.Close() })
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake for %q: %v", serverName, err)
	}
	if cn := tc.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != want {
		t.Fatalf("server name %q reached %q, want %q", serverName, cn, want)
	}
	host := serverName
	if host == "" {
		host = "unnamed.test"
	}
	return &httpsSession{tc: tc, r: bufio.NewReader(tc), host: host, want: want}
}

// get makes one keep-alive request on the session and checks the answer
// names the backend it was opened to.
func (s *httpsSession) get(t *testing.T, when string) {
	t.Helper()
	s.tc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintf(s.tc, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", s.host); err != nil {
		t.Fatalf("%s: the request to %s: %v (reset: %v)", when, s.want, err, isReset(err))
	}
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		t.Fatalf("%s: the answer from %s: %v (reset: %v)", when, s.want, err, isReset(err))
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.TrimSpace(string(body)) != s.want {
		t.Fatalf("%s: %s answered %q, %v; want %q", when, s.want, body, err, s.want)
	}
}
