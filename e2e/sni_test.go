package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// SNI routing with the real binary, real TLS servers (nginx, a
// certificate per name: the certificate the client sees proves which
// backend it reached) and real clients (openssl s_client, curl, Go's
// crypto/tls with its default post-quantum key share), issue 29: every
// shape of ClientHello lands where its route says; what is no
// ClientHello goes to the listener's pool, or is reset.

type sniSetup struct {
	edge, reset, mail string // listeners
	admin             string
	smtp              *testnet.Backend
}

func startSNI(t *testing.T) *sniSetup {
	t.Helper()
	backends := startHTTPSBackends(t, "api.example.test", "web.example.test", "fallback.example.test")
	s := &sniSetup{edge: testnet.FreeAddr(t), reset: testnet.FreeAddr(t), mail: testnet.FreeAddr(t), admin: testnet.FreeAddr(t),
		smtp: testnet.StartBackend(t, "220 smtp ready", "")}
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n", s.admin)
	routes := "[[listener.route]]\nsni = [\"api.example.test\"]\npool = \"api\"\n[[listener.route]]\nsni = [\"*.example.test\"]\npool = \"web\"\n"
	fmt.Fprintf(&b, "[[listener]]\nname = \"edge\"\nbind = %q\npool = \"fallback\"\ninspect_timeout = \"20s\"\n%s", s.edge, routes)
	fmt.Fprintf(&b, "[[listener]]\nname = \"edge-reset\"\nbind = %q\npool = \"fallback\"\ninspect_timeout = \"20s\"\non_unrecognized = \"reset\"\n%s", s.reset, routes)
	fmt.Fprintf(&b, "[[listener]]\nname = \"mail\"\nbind = %q\npool = \"smtp\"\ninspect_timeout = \"300ms\"\n%s", s.mail, routes)
	for pool, addr := range map[string]string{"api": backends["api.example.test"], "web": backends["web.example.test"],
		"fallback": backends["fallback.example.test"], "smtp": s.smtp.Addr} {
		fmt.Fprintf(&b, "[pool.%s]\n[pool.%s.health]\nenabled = false\n[[pool.%s.backend]]\naddr = %q\n", pool, pool, pool, addr)
	}
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, s.edge)
	waitAccepting(t, "l4lb's admin endpoint", p, s.admin)
	return s
}

func TestSNIRoutesEveryShapeOfClientHello(t *testing.T) {
	s := startSNI(t)
	pq := &tls.Config{} // Go's defaults: X25519MLKEM768 first, a ClientHello over 1,200 bytes
	var shaped *helloShaper
	for _, tc := range []struct {
		name, serverName, want string
		wrap                   func(net.Conn) net.Conn
		cfg                    *tls.Config
	}{
		{"exact name", "api.example.test", "api.example.test", nil, pq},
		{"wildcard", "www.example.test", "web.example.test", nil, pq},
		{"case and trailing dot", "API.Example.Test.", "api.example.test", nil, pq},
		{"no route", "other.test", "fallback.example.test", nil, pq},
		{"no server name", "", "fallback.example.test", nil, pq},
		{"one byte at a time", "api.example.test", "api.example.test", func(c net.Conn) net.Conn {
			shaped = &helloShaper{Conn: c, shape: byteAtATime}
			return shaped
		}, pq},
		{"two TLS records", "www.example.test", "web.example.test", func(c net.Conn) net.Conn {
			return &helloShaper{Conn: c, shape: twoRecords}
		}, pq},
		{"a ClientHello of nearly 16 KiB", "api.example.test", "api.example.test", nil, &tls.Config{NextProtos: bigALPN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn, body, err := tlsSubject(t, s.edge, tc.serverName, tc.wrap, tc.cfg)
			if err != nil || cn != tc.want || body != tc.want {
				t.Fatalf("reached %q answering %q (%v), want %q", cn, body, err, tc.want)
			}
		})
	}
	if shaped == nil || shaped.size < 1200 {
		t.Errorf("the default ClientHello was %d bytes, want the post-quantum one over 1,200", shaped.size)
	}
	if v := e2eutil.Metric(t, s.admin, `l4lb_route_connections_total{listener="edge",route="api"}`); v < 4 {
		t.Errorf("route api counted %v clients, want 4 or more", v)
	}
}

// bigALPN is a list of protocols that makes a ClientHello of about 15.5
// KB, near the 16 KiB l4lb reads; nginx picks http/1.1.
func bigALPN() []string {
	out := []string{"http/1.1"}
	for i := 0; len(out) < 57; i++ {
		out = append(out, fmt.Sprintf("x-%03d-%s", i, strings.Repeat("p", 240)))
	}
	return out
}

func TestSNIWithRealClients(t *testing.T) {
	s := startSNI(t)
	if openssl := testnet.ToolPath("openssl"); openssl != "" {
		cmd := exec.Command(openssl, "s_client", "-connect", s.edge, "-servername", "api.example.test")
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "CN = api.example.test") && !strings.Contains(string(out), "CN=api.example.test") {
			t.Errorf("openssl s_client -servername api.example.test saw:\n%s", out)
		}
	} else {
		t.Log("openssl not installed: its case skipped")
	}
	if curl := testnet.ToolPath("curl"); curl != "" {
		host, port, _ := net.SplitHostPort(s.edge)
		out, err := exec.Command(curl, "-sk", "--resolve", "www.example.test:"+port+":"+host, "https://www.example.test:"+port+"/").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "web.example.test" {
			t.Errorf("curl https://www.example.test: %q %v", out, err)
		}
	} else {
		t.Log("curl not installed: its case skipped")
	}
}

func TestSNIWhatIsNoClientHello(t *testing.T) {
	s := startSNI(t)
	// Plain HTTP to the TLS listener: the listener's pool, whose nginx
	// says so.
	c, err := net.Dial("tcp", s.edge)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
	reply, _ := bufio.NewReader(c).ReadString(0)
	if !strings.Contains(reply, "400") {
		t.Fatalf("plain HTTP got %q, want the fallback nginx's 400", reply)
	}

	// The same with on_unrecognized = "reset": a reset.
	r, err := net.Dial("tcp", s.reset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetDeadline(time.Now().Add(15 * time.Second))
	fmt.Fprintf(r, "GET / HTTP/1.0\r\n\r\n")
	if _, err := r.Read(make([]byte, 1)); !isReset(err) {
		t.Fatalf("plain HTTP on the reset listener: %v, want a reset", err)
	}

	// A ClientHello that never completes: at inspect_timeout, the
	// listener's pool (here a server that greets), counted incomplete.
	p, err := net.Dial("tcp", s.mail)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetDeadline(time.Now().Add(15 * time.Second))
	p.Write([]byte{22, 3, 1, 0x02, 0x00, 1, 0, 1, 0xfc, 3, 3})
	if greeting, err := bufio.NewReader(p).ReadString('\n'); err != nil || !strings.HasPrefix(greeting, "220 smtp ready") {
		t.Fatalf("a client stuck in its ClientHello got %q (%v), want the listener's pool", greeting, err)
	}
	if v := e2eutil.Metric(t, s.admin, `l4lb_inspect_total{listener="mail",result="incomplete"}`); v != 1 {
		t.Fatalf("incomplete inspections %v, want 1", v)
	}

	// A server-first protocol: nothing sent, the server's greeting after
	// inspect_timeout.
	m, err := net.Dial("tcp", s.mail)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.SetDeadline(time.Now().Add(15 * time.Second))
	greeting, err := bufio.NewReader(m).ReadString('\n')
	if err != nil || !strings.HasPrefix(greeting, "220 smtp ready") {
		t.Fatalf("server-first client got %q (%v), want the greeting", greeting, err)
	}
}
