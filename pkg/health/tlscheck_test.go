package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The TLS check against real TLS servers (Go's crypto/tls, certificates
// made by the test) and against TCP servers that do not speak TLS, on
// 127.0.0.1; see sendexpect_test.go for the timeouts.

const backendName = "backend.test"

// tlsServer serves TLS with cfg on a free port of 127.0.0.1: each
// connection is handshaken, then read until the client closes it. It
// returns the address and the server names the clients sent.
func tlsServer(t *testing.T, cfg *tls.Config) (addr string, sni func() []string) {
	t.Helper()
	var mu sync.Mutex
	var names []string
	cfg = cfg.Clone()
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		names = append(names, hello.ServerName)
		mu.Unlock()
		return nil, nil
	}
	addr = tcpServer(t, func(c *net.TCPConn) {
		c.SetDeadline(time.Now().Add(generous))
		conn := tls.Server(c, cfg)
		if conn.Handshake() == nil {
			io.Copy(io.Discard, conn)
		}
	})
	return addr, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), names...)
	}
}

// readRecord reads one TLS record (a ClientHello) from c.
func readRecord(c *net.TCPConn) {
	c.SetDeadline(time.Now().Add(generous))
	var hdr [5]byte
	if _, err := io.ReadFull(c, hdr[:]); err == nil {
		io.ReadFull(c, make([]byte, int(hdr[3])<<8|int(hdr[4])))
	}
}

// caFile writes cert's PEM into a file of t's own and returns it as a
// CAFile.
func caFile(t *testing.T, cert testnet.TLSCert) *CAFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return NewCAFile(path, nil)
}

func TestTLSCheck(t *testing.T) {
	cert := testnet.SelfSignedCert(t, backendName)
	stranger := testnet.SelfSignedCert(t, backendName) // same name, another key
	served := &tls.Config{Certificates: []tls.Certificate{cert.Cert}}
	garbage := func(c *net.TCPConn) { c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")); io.Copy(io.Discard, c) }
	// Both read the ClientHello first, so that the close is a FIN, or a
	// reset, whichever they mean, not a reset for an unread hello.
	helloClose := func(c *net.TCPConn) { readRecord(c) }
	helloReset := func(c *net.TCPConn) { readRecord(c); c.SetLinger(0) }
	silent := func(c *net.TCPConn) { io.Copy(io.Discard, c) }
	tests := []struct {
		name    string
		tls     *tls.Config          // a TLS server; nil: handle
		handle  func(c *net.TCPConn) // a TCP server; both nil: refused
		dial    DialFunc
		opts    TLSOptions
		timeout time.Duration
		want    Result
		cause   string
	}{
		{"handshake without verification passes", served, nil, nil, TLSOptions{ServerName: backendName}, generous, Pass, ""},
		{"any name passes without verification", served, nil, nil, TLSOptions{ServerName: "other.test"}, generous, Pass, ""},
		{"certificate verified against ca_file passes", served, nil, nil, TLSOptions{ServerName: backendName, Roots: caFile(t, cert)}, generous, Pass, ""},
		{"wrong server_name with verification fails", served, nil, nil, TLSOptions{ServerName: "other.test", Roots: caFile(t, cert)}, generous, Fail,
			"tls handshake: tls: failed to verify certificate: x509: certificate is valid for backend.test, not other.test"},
		{"certificate of another CA fails", served, nil, nil, TLSOptions{ServerName: backendName, Roots: caFile(t, stranger)}, generous, Fail,
			"x509: certificate signed by unknown authority"},
		{"a server with no certificate for the name fails", &tls.Config{}, nil, nil, TLSOptions{ServerName: backendName}, generous, Fail,
			"tls handshake: remote error: tls: unrecognized name"},
		{"a backend that speaks something else fails", nil, garbage, nil, TLSOptions{ServerName: backendName}, generous, Fail,
			"tls handshake: tls: first record does not look like a TLS handshake"},
		{"a close after the ClientHello fails", nil, helloClose, nil, TLSOptions{ServerName: backendName}, generous, Fail,
			"tls handshake: closed by the backend before the handshake completed: EOF"},
		{"a reset after the ClientHello fails", nil, helloReset, nil, TLSOptions{ServerName: backendName}, generous, Fail, "tls handshake: read tcp"},
		{"silent backend fails at the timeout", nil, silent, nil, TLSOptions{ServerName: backendName}, short, Fail, "tls handshake: timed out"},
		{"refused fails", nil, nil, nil, TLSOptions{ServerName: backendName}, generous, Fail, "connection refused"},
		{"local trouble is inconclusive", served, nil, emfileDial, TLSOptions{ServerName: backendName}, generous, Inconclusive, "too many open files"},
		{"an unreadable ca_file is inconclusive", served, nil, nil, TLSOptions{ServerName: backendName, Roots: NewCAFile(filepath.Join(t.TempDir(), "gone.pem"), nil)},
			generous, Inconclusive, "ca_file: stat "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := deadTCP(t)
			var sni func() []string
			switch {
			case tc.tls != nil:
				addr, sni = tlsServer(t, tc.tls)
			case tc.handle != nil:
				addr = tcpServer(t, tc.handle)
			}
			o, _ := run(TLSCheck(tc.dial, addr, tc.opts, isLocal), tc.timeout)
			wantOutcome(t, o, tc.want, tc.cause)
			if tc.want == Pass {
				if got := sni(); len(got) != 1 || got[0] != tc.opts.ServerName {
					t.Fatalf("the server was sent server names %q, want [%q]", got, tc.opts.ServerName)
				}
			}
		})
	}
}

// A check the caller calls off (a stop) says nothing about the backend.
func TestTLSCheckCanceled(t *testing.T) {
	held := make(chan struct{})
	addr := tcpServer(t, func(c *net.TCPConn) {
		readRecord(c) // the check is in its handshake now
		close(held)
		io.Copy(io.Discard, c)
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	o := TLSCheck(nil, addr, TLSOptions{ServerName: backendName}, isLocal)(ctx)
	wantOutcome(t, o, Inconclusive, "tls handshake: called off")
}

// The TLS server of TestTLSCheckClosesCleanly: it records the bytes it
// reads from the wire, and whether its read of the client's close ended
// cleanly.
type closeWatch struct {
	net.Conn
	mu       sync.Mutex
	wire     bytes.Buffer
	readErr  error
	shakeEnd int // len(wire) once the handshake was done
}

func (w *closeWatch) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	w.mu.Lock()
	w.wire.Write(b[:n])
	w.mu.Unlock()
	return n, err
}

// A passing check ends its connection as a well-behaved client does:
// close_notify (seen on the wire in TLS 1.2, where an alert record's type
// is not encrypted), then a FIN (the server's read ends without error, no
// reset), and it stays until the server has closed too, reading the TLS
// 1.3 session tickets it never asked for, so that its own close is not a
// reset for unread bytes either.
func TestTLSCheckClosesCleanly(t *testing.T) {
	cert := testnet.SelfSignedCert(t, backendName)
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			watches := make(chan *closeWatch, 1)
			var serverClosed atomic.Bool // set just before the server closes
			cfg := &tls.Config{Certificates: []tls.Certificate{cert.Cert}, MinVersion: version, MaxVersion: version}
			addr := tcpServer(t, func(c *net.TCPConn) {
				c.SetDeadline(time.Now().Add(generous))
				w := &closeWatch{Conn: c}
				conn := tls.Server(w, cfg)
				if err := conn.Handshake(); err != nil {
					t.Errorf("server handshake: %v", err)
					return
				}
				w.mu.Lock()
				w.shakeEnd = w.wire.Len()
				w.mu.Unlock()
				_, w.readErr = io.Copy(io.Discard, conn)
				// A client that does not wait for the server's close is
				// gone by now.
				time.Sleep(50 * time.Millisecond)
				watches <- w
				serverClosed.Store(true)
			})
			o, _ := run(TLSCheck(nil, addr, TLSOptions{ServerName: backendName}, isLocal), generous)
			closedFirst := serverClosed.Load()
			wantOutcome(t, o, Pass, "")
			w := <-watches
			if !closedFirst {
				t.Fatal("the check returned before the server closed: its close would reset unread bytes")
			}
			if w.readErr != nil {
				t.Fatalf("the server's read of the check's close ended in %v, want a clean end", w.readErr)
			}
			after := w.wire.Bytes()[w.shakeEnd:]
			if version == tls.VersionTLS12 && (len(after) < 5 || after[0] != 0x15) {
				t.Fatalf("after the handshake the check sent % x, want an alert record (close_notify)", after)
			}
		})
	}
}

// A CA file that changes is read again at the next check: a rotated CA
// needs no reload.
func TestCAFileRotates(t *testing.T) {
	old, rotated := testnet.SelfSignedCert(t, backendName), testnet.SelfSignedCert(t, backendName)
	addr, _ := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{rotated.Cert}})
	roots := caFile(t, old)
	check := TLSCheck(nil, addr, TLSOptions{ServerName: backendName, Roots: roots}, isLocal)
	o, _ := run(check, generous)
	wantOutcome(t, o, Fail, "x509: certificate signed by unknown authority")

	next := roots.Path() + ".new"
	if err := os.WriteFile(next, rotated.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, roots.Path()); err != nil {
		t.Fatal(err)
	}
	o, _ = run(check, generous)
	wantOutcome(t, o, Pass, "")

	if err := os.WriteFile(roots.Path(), []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ = run(check, generous)
	wantOutcome(t, o, Inconclusive, "no PEM certificate")
}

// A CA file's trouble is reported once per change (not once per check,
// nor per backend): when it turns unusable, when its error changes, and
// when it is usable again.
func TestCAFileReportsTroubleOncePerChange(t *testing.T) {
	var reports []string
	good := caFile(t, testnet.SelfSignedCert(t, backendName))
	roots := NewCAFile(good.Path(), func(err error) {
		if err == nil {
			reports = append(reports, "usable")
			return
		}
		reports = append(reports, err.Error())
	})
	pem, err := os.ReadFile(roots.Path())
	if err != nil {
		t.Fatal(err)
	}
	pools := func(n int) {
		for range n {
			roots.Pool()
		}
	}
	pools(3)
	if len(reports) != 0 {
		t.Fatalf("reports %q while the file is usable, want none", reports)
	}
	if err := os.Remove(roots.Path()); err != nil {
		t.Fatal(err)
	}
	pools(3)
	if err := os.WriteFile(roots.Path(), []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pools(3)
	if err := os.WriteFile(roots.Path(), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	pools(3)
	if len(reports) != 3 || !strings.Contains(reports[0], "no such file") || !strings.Contains(reports[1], "no PEM certificate") || reports[2] != "usable" {
		t.Fatalf("reports %q, want: the missing file, then no PEM certificate, then usable, once each", reports)
	}
}
