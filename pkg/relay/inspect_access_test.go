package relay

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
)

// Every close record of a routing listener's client says so (Routed:
// JSON then writes route and server_name, empty or not), with the route
// and the server name of what it sent.
func TestRoutedListenersRecordsNameTheirRoute(t *testing.T) {
	h, _, _ := routedHarness(t, false, 20*time.Second)
	q := accesslog.NewQueue(len(h.loops), 64)
	h.sh.SetAccessLog(q)
	t.Cleanup(func() { h.sh.SetAccessLog(nil) })
	type want struct{ route, name string }
	sent := map[string]want{}
	for _, tc := range []struct {
		tag  string
		what []byte
		want want
	}{
		{"api", captureHello(t, "API.test"), want{"api", "api.test"}},
		{"fallback", captureHello(t, "other.test"), want{"", "other.test"}},
		{"fallback", []byte("GET / HTTP/1.0\r\n\r\n"), want{"", ""}},
	} {
		c := h.dial("edge")
		if tag, _ := helloExchange(t, c, tc.what, 0); tag != tc.tag {
			t.Fatalf("reached %q, want %q", tag, tc.tag)
		}
		sent[c.LocalAddr().String()] = tc.want
		c.Close()
	}
	got := map[string]accesslog.Record{}
	testnet.Eventually(t, "a close record of each client", func() bool {
		q.Drain(func(r *accesslog.Record) {
			if r.Event == accesslog.EventClose {
				got[r.Client.String()] = *r
			}
		})
		return len(got) == len(sent)
	})
	for client, w := range sent {
		r := got[client]
		if !r.Routed || r.Route != w.route || r.ServerName != w.name {
			t.Errorf("client %s: routed %v, route %q, server name %q; want true, %q, %q", client, r.Routed, r.Route, r.ServerName, w.route, w.name)
		}
	}
}
