package relay

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// captureHello is the ClientHello record Go's crypto/tls client writes for
// serverName.
func captureHello(t *testing.T, serverName string) []byte {
	return testnet.GoClientHello(t, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
}

// routedHarness is a harness whose listener "edge" routes api.test to
// the pool of front "api" and everything else to its own pool.
func routedHarness(t *testing.T, reset bool, timeout time.Duration) (*harness, *testnet.Backend, *testnet.Backend) {
	t.Helper()
	fallback := testnet.StartBackend(t, "fallback", "")
	api := testnet.StartBackend(t, "api", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{
		{name: "edge", backends: []string{fallback.Addr}},
		{name: "api", backends: []string{api.Addr}},
	}})
	route := &Route{Name: "api", Pool: h.front("api").Pool()}
	h.front("edge").SetRouting(&Routing{
		Match:  func(name string, _ []string) (int, bool) { return 0, name == "api.test" },
		Routes: []*Route{route}, Timeout: timeout, Reset: reset,
	})
	return h, fallback, api
}

// helloExchange writes what to c in writes of size each (0: at once) and
// returns the backend's tag line and the echo of what.
func helloExchange(t *testing.T, c *net.TCPConn, what []byte, size int) (tag string, echo []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		if size == 0 {
			c.Write(what)
		} else {
			for i := 0; i < len(what); i += size {
				c.Write(what[i:min(i+size, len(what))])
				time.Sleep(200 * time.Microsecond)
			}
		}
		c.CloseWrite()
	}()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("no tag line: %v", err)
	}
	echo, err = io.ReadAll(r)
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	return strings.TrimSuffix(line, "\n"), echo
}

func TestInspectionRoutesByServerNameAndPassesTheHelloOn(t *testing.T) {
	h, _, _ := routedHarness(t, false, 20*time.Second)
	hello := captureHello(t, "api.test")
	if len(hello) < 1200 {
		t.Fatalf("captured a %d-byte ClientHello, want Go's post-quantum one", len(hello))
	}
	for _, tc := range []struct {
		name string
		what []byte
		size int
		want string
	}{
		{"whole", hello, 0, "api"},
		{"a byte at a time", hello, 1, "api"},
		{"another name", captureHello(t, "other.test"), 0, "fallback"},
		{"not TLS", []byte("GET / HTTP/1.0\r\n\r\n"), 0, "fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.dial("edge")
			defer c.Close()
			tag, echo := helloExchange(t, c, tc.what, tc.size)
			if tag != tc.want || !bytes.Equal(echo, tc.what) {
				t.Fatalf("reached %q, echo of %d bytes (equal %v); want %q and the %d bytes exactly", tag, len(echo), bytes.Equal(echo, tc.what), tc.want, len(tc.what))
			}
		})
	}
	rt := h.front("edge").Routing()
	if n := rt.Results[inspectRouted].Load(); n != 2 {
		t.Errorf("%d routed, want 2", n)
	}
	if n := rt.Results[inspectUnmatched].Load() + rt.Results[inspectNotTLS].Load(); n != 2 {
		t.Errorf("%d unmatched or not TLS, want 2", n)
	}
	if n := rt.Routes[0].Clients.Load(); n != 2 {
		t.Errorf("route api took %d clients, want 2", n)
	}
}

func TestInspectionTimeoutAndReset(t *testing.T) {
	h, _, _ := routedHarness(t, false, 300*time.Millisecond)
	// Nothing sent: a server-first protocol, served by the listener's
	// pool once inspect_timeout has passed.
	c := h.dial("edge")
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "fallback\n" {
		t.Fatalf("server-first client got %q (%v)", line, err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("served after %v, before inspect_timeout", waited)
	}
	if n := h.front("edge").Routing().Results[inspectServerFirst].Load(); n != 1 {
		t.Fatalf("%d server-first, want 1", n)
	}

	hr, _, _ := routedHarness(t, true, 20*time.Second)
	r := hr.dial("edge")
	defer r.Close()
	r.SetDeadline(time.Now().Add(20 * time.Second))
	r.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if _, err := r.Read(make([]byte, 1)); !isReset(err) {
		t.Fatalf("not TLS with on_unrecognized = reset: %v, want a reset", err)
	}
	testnet.Eventually(t, "the reset counted", func() bool { return hr.front("edge").Closed[CloseUnrecognized].Load() == 1 })
}

func TestInspectedNameTravelsInTheProxyHeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, 4096)
		n, _ := io.ReadAtLeast(c, buf, 40)
		got <- buf[:n]
	}()
	fallback := testnet.StartBackend(t, "fallback", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{
		{name: "edge", backends: []string{fallback.Addr}},
		{name: "api", backends: []string{ln.Addr().String()}, keys: `proxy_protocol = "v2"`},
	}})
	h.front("edge").SetRouting(&Routing{
		Match:  func(name string, _ []string) (int, bool) { return 0, name == "api.test" },
		Routes: []*Route{{Name: "api", Pool: h.front("api").Pool()}}, Timeout: time.Second,
	})
	c := h.dial("edge")
	defer c.Close()
	c.Write(captureHello(t, "api.test"))
	select {
	case b := <-got:
		if !bytes.Contains(b, append([]byte{0x02, 0x00, byte(len("api.test"))}, "api.test"...)) {
			t.Fatalf("the backend's first bytes % x lack the PP2_TYPE_AUTHORITY TLV for api.test", b)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the routed backend got nothing")
	}
}
