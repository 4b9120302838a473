package admin

import (
	"strings"
	"testing"
)

// A drain or weight request whose query string does not decode, or names
// a parameter the action does not take, must be refused (400), not run
// with the default standing in: r.URL.Query drops a pair it cannot decode,
// so "timeout=%zz", "timeout=0s;" or a misspelled "timout=0s" used to
// drain for the default 30s with a 202.
func TestMalformedQueryIsRefused(t *testing.T) {
	srv, p := newTestServer(t)
	base := srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9001/"
	for _, tc := range []struct{ name, path string }{
		{"bad escape in the timeout", "drain?timeout=%zz"},
		{"semicolon after the timeout", "drain?timeout=0s;"},
		{"bad escape beside the weight", "weight?value=2&x=%zz"},
		{"misspelled timeout", "drain?timout=0s"},
		{"weight's parameter on drain", "drain?value=0s"},
		{"unknown parameter beside the weight", "weight?value=2&force=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, v := do(t, "POST", base+tc.path, nil)
			if code != 400 || !strings.Contains(v["error"].(string), "query") {
				t.Fatalf("%d %v, want 400 naming the query", code, v)
			}
			b, _ := p.Backend("127.0.0.1:9001")
			if b.Draining() || b.Weight() != 3 {
				t.Fatalf("refused request acted: draining %v, weight %d", b.Draining(), b.Weight())
			}
		})
	}
}
