package e2e

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Helpers of the SNI routing tests: certificates, an nginx serving HTTPS
// with one certificate per backend, and client connections that shape
// their ClientHello (one byte at a time, split over TLS records).

// startHTTPSBackends runs one nginx with an HTTPS server per name, each on
// a port of its own with its own certificate, answering "NAME\n" to GET
// /; it returns each name's address.
func startHTTPSBackends(t *testing.T, names ...string) map[string]string {
	t.Helper()
	nginx := testnet.ToolPath("nginx")
	if nginx == "" {
		testnet.Missing(t, "nginx not installed", "nginx")
	}
	dir := t.TempDir()
	addrs := map[string]string{}
	var b strings.Builder
	fmt.Fprintf(&b, "daemon off;\nmaster_process off;\npid %s;\nerror_log %s info;\nevents {}\nhttp {\n", filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"))
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "  %s_temp_path %s;\n", k, filepath.Join(dir, k))
	}
	b.WriteString("  access_log off;\n")
	for _, name := range names {
		crt, key := testnet.SelfSignedCert(t, name).WriteFiles(t, dir, name)
		addr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
		addrs[name] = addr
		fmt.Fprintf(&b, "  server {\n    listen %s ssl;\n    ssl_certificate %s;\n    ssl_certificate_key %s;\n    location / { return 200 \"%s\\n\"; }\n  }\n", addr, crt, key, name)
	}
	b.WriteString("}\n")
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ppStartChild(t, "nginx", nginx, nil, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	for _, addr := range addrs {
		waitDialable(t, addr)
	}
	return addrs
}

func waitDialable(t *testing.T, addr string) {
	t.Helper()
	testnet.Eventually(t, addr+" to accept", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// tlsSubject connects to addr through conn (nil: a plain TCP dial) with
// the server name given ("" sends none), completes the handshake and
// returns the common name of the certificate the server presented and the
// first line of its answer to a GET.
func tlsSubject(t *testing.T, addr, serverName string, wrap func(net.Conn) net.Conn, cfg *tls.Config) (string, string, error) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", "", err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(15 * time.Second))
	conn := raw
	if wrap != nil {
		conn = wrap(raw)
	}
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	cfg.ServerName, cfg.InsecureSkipVerify = serverName, true
	tc := tls.Client(conn, cfg)
	if err := tc.Handshake(); err != nil {
		return "", "", err
	}
	cn := tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	host := serverName
	if host == "" {
		host = "unnamed.test" // HTTP/1.0 with an empty Host is refused by nginx
	}
	if _, err := fmt.Fprintf(tc, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", host); err != nil {
		return cn, "", err
	}
	var body strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := tc.Read(buf)
		body.Write(buf[:n])
		if err != nil {
			break
		}
	}
	lines := strings.Split(strings.TrimSpace(body.String()), "\n")
	return cn, strings.TrimSpace(lines[len(lines)-1]), nil
}

// helloShaper writes the connection's first TLS record (the ClientHello)
// as shaped by shape, and everything after it as it comes. It records
// the record's length.
type helloShaper struct {
	net.Conn
	shape func(c net.Conn, record []byte) error
	once  sync.Once
	size  int
}

func (h *helloShaper) Write(p []byte) (int, error) {
	var err error
	first := false
	h.once.Do(func() {
		first = true
		h.size = len(p)
		err = h.shape(h.Conn, p)
	})
	if first {
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return h.Conn.Write(p)
}

// byteAtATime writes the record one byte per write, a few milliseconds
// apart (TCP_NODELAY is Go's default, so each is a segment).
func byteAtATime(c net.Conn, record []byte) error {
	for i := range record {
		if _, err := c.Write(record[i : i+1]); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// twoRecords writes the handshake record as two TLS records, its
// handshake message split in the middle (valid TLS: a handshake message
// may span records), each in a segment of its own.
func twoRecords(c net.Conn, record []byte) error {
	if len(record) < 6 || record[0] != 22 {
		_, err := c.Write(record)
		return err
	}
	body := record[5:]
	half := len(body) / 2
	for _, part := range [][]byte{body[:half], body[half:]} {
		rec := append([]byte{22, record[1], record[2], 0, 0}, part...)
		binary.BigEndian.PutUint16(rec[3:5], uint16(len(part)))
		if _, err := c.Write(rec); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
