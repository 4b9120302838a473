package admin

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends request bytes as written (no client rewrites the
// request line) and returns the response's status and body.
func rawRequest(t *testing.T, addr, request string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// An absolute-form request line makes net/http take r.Host from the URI
// and drop the Host header: the header as received must still be the one
// judged, so such requests are refused.
func TestAbsoluteURIDoesNotPassTheHostCheck(t *testing.T) {
	srv, p := newTestServer(t)
	addr := strings.TrimPrefix(srv.URL, "http://")
	disable := "/api/v1/pools/web/backends/127.0.0.1:9001/disable"
	for _, tc := range []struct {
		name, requestLine, host string
		code                    int
		msg                     string
	}{
		{"absolute URI, foreign Host", "POST http://" + addr + disable, "evil.example", 400, "not a proxy"},
		{"absolute URI, foreign Host, GET", "GET http://" + addr + "/api/v1/pools", "evil.example", 400, "not a proxy"},
		{"absolute URI naming the foreign host", "POST http://evil.example" + disable, "evil.example", 400, "not a proxy"},
		{"absolute URI, matching Host", "POST http://" + addr + disable, addr, 400, "not a proxy"},
		{"origin form, foreign Host", "POST " + disable, "evil.example", 403, "Host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawRequest(t, addr, fmt.Sprintf("%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", tc.requestLine, tc.host))
			if code != tc.code || !strings.Contains(body, tc.msg) {
				t.Fatalf("%d %s, want %d with %q", code, body, tc.code, tc.msg)
			}
			if b, _ := p.Backend("127.0.0.1:9001"); b.Breaker().Disabled {
				t.Fatal("the request disabled the backend")
			}
		})
	}
	// The same route in origin form with an IP Host still works.
	code, body := rawRequest(t, addr, "POST "+disable+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	if code != 200 {
		t.Fatalf("origin-form POST: %d %s, want 200", code, body)
	}
}
