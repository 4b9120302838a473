package admin

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/l4lb/l4lb/pkg/pool"
)

// A client that accepts gzip gets the pools JSON compressed, and it is
// the same JSON; one that does not gets it plain; either way caches are
// told the answer depends on Accept-Encoding.
func TestAPIAnswersGzipToClientsThatAcceptIt(t *testing.T) {
	p := testPool(t)
	srv := httptest.NewServer(Handler(Sources{Pools: []*pool.Pool{p}}, "", nil))
	t.Cleanup(srv.Close)
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path, accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	plainResp, plain := get("/api/v1/pools", "")
	if plainResp.Header.Get("Content-Encoding") != "" || plainResp.Header.Get("Vary") != "Accept-Encoding" || !json.Valid(plain) {
		t.Fatalf("without Accept-Encoding: encoding %q, vary %q, JSON valid %v", plainResp.Header.Get("Content-Encoding"), plainResp.Header.Get("Vary"), json.Valid(plain))
	}
	for _, accept := range []string{"gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.5", "*"} {
		resp, body := get("/api/v1/pools", accept)
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want gzip", accept, resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Accept-Encoding %q: decompressed %d bytes (%v), want the plain answer's %d", accept, len(got), err, len(plain))
		}
	}
	for _, accept := range []string{"gzip;q=0", "identity", "br"} {
		if resp, _ := get("/api/v1/pools", accept); resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %q: compressed (%q)", accept, resp.Header.Get("Content-Encoding"))
		}
	}
	if resp, body := get("/", "gzip"); resp.Header.Get("Content-Encoding") != "gzip" || len(body) == 0 {
		t.Fatalf("status page with gzip: %q, %d bytes", resp.Header.Get("Content-Encoding"), len(body))
	}
	if resp, _ := get("/debug/pprof/", "gzip"); resp.Header.Get("Content-Encoding") != "" {
		t.Fatal("the profiles' pages were compressed again")
	}
}
