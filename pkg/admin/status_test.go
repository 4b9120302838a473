package admin

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// GET / serves the embedded page with headers that lock it down; the CSP
// names the hashes of exactly the inline style and script the page has.
func TestStatusPageHeaders(t *testing.T) {
	srv, _ := newTestServer(t)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != string(statusHTML) {
		t.Fatalf("GET /: %d, %d bytes; want 200 and the page's %d", resp.StatusCode, len(body), len(statusHTML))
	}
	for k, want := range map[string]string{
		"Content-Type": "text/html; charset=utf-8", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, m := range regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`).FindAllStringSubmatch(string(body), -1) {
		sum := sha256.Sum256([]byte(m[2]))
		want := m[1] + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "';"
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q: the page's inline %s would not run", csp, want, m[1])
		}
	}
	for _, want := range []string{"default-src 'none';", "connect-src 'self';", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows unsafe sources", csp)
	}
}

// Only exactly "/" is the page, GET and HEAD only; the rest of the
// endpoint answers as before, and the browser guard covers the page too.
func TestStatusPageRouteAndGuard(t *testing.T) {
	srv, _ := newTestServer(t)
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
		want         int
	}{
		{"HEAD", "/", nil, 200},
		{"POST", "/", nil, http.StatusMethodNotAllowed},
		{"GET", "/index.html", nil, 404},
		{"GET", "/status", nil, 404},
		{"GET", "/api/", nil, 404},
		{"GET", "/", map[string]string{"Origin": "http://127.0.0.1"}, 403},
		{"GET", "/", map[string]string{"Host": "evil.example"}, 403},
		{"GET", "/", map[string]string{"Host": "localhost"}, 200},
	} {
		resp, err := http.DefaultClient.Do(newRequest(t, c.method, srv.URL+c.path, "", c.hdr))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s %v: %d, want %d", c.method, c.path, c.hdr, resp.StatusCode, c.want)
		}
	}
	// With a token, a POST to / is refused before anything else.
	tsrv, _ := newTokenServer(t, "tok")
	resp, err := http.Post(tsrv.URL+"/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST / without the token: %d, want 401", resp.StatusCode)
	}
}

// The page's script reads and never writes markup: no HTML sinks a pool or
// backend name from the configuration could reach, and one fetch, a GET
// of the pools.
func TestStatusPageScriptUsesNoHTMLSinks(t *testing.T) {
	page := string(statusHTML)
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(", "method:"} {
		if strings.Contains(page, sink) {
			t.Errorf("status.html uses %s", sink)
		}
	}
	if n := strings.Count(page, "fetch("); n != 1 || !strings.Contains(page, `fetch("/api/v1/pools"`) {
		t.Errorf("status.html has %d fetch calls; want the one GET of /api/v1/pools", n)
	}
}
