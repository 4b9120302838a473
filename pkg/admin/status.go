package admin

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
)

// The status page (GET /): one self-contained HTML file whose script reads
// GET /api/v1/pools every few seconds and updates its tables in place. It
// is served behind the same guard as the API (no Origin, an IP or
// localhost Host), reads only, and its headers lock it down: the
// Content-Security-Policy lets only its own inline style and script run
// (by their hashes, computed here from the embedded file, so an edit of
// the page cannot leave a stale hash) and connect only to its own origin;
// no framing, no sniffing, no caching.

//go:embed status.html
var statusHTML []byte

// statusCSP is the page's Content-Security-Policy.
var statusCSP = "default-src 'none'; " +
	"script-src " + inlineHash(statusHTML, "<script>", "</script>") + "; " +
	"style-src " + inlineHash(statusHTML, "<style>", "</style>") + "; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash is the CSP source ('sha256-...') of the text between the
// first open and the close after it in page: the one inline element of
// that kind the page has. A page without it is a build mistake, caught
// at start by the tests.
func inlineHash(page []byte, open, close string) string {
	_, rest, ok := strings.Cut(string(page), open)
	body, _, ok2 := strings.Cut(rest, close)
	if !ok || !ok2 {
		panic("admin: status.html has no " + open + " element")
	}
	sum := sha256.Sum256([]byte(body))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// statusPage serves the page (the mux lets through GET and HEAD only).
func statusPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(statusHTML)))
	h.Set("Content-Security-Policy", statusCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY") // frame-ancestors for browsers without CSP 2
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(statusHTML)
}
