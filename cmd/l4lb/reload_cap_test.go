package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A reload that changes max_connections applies the cap at once
// (docs/operations.md, "Reloading the configuration"); the metric that
// shows the cap must say the same.
func TestReloadUpdatesTheConnectionCapMetric(t *testing.T) {
	b1 := testnet.StartBackend(t, "b1", "")
	front, adm := testnet.FreeAddr(t), testnet.FreeAddr(t)
	for adm == front {
		adm = testnet.FreeAddr(t)
	}
	render := func(max int) string {
		return fmt.Sprintf("[global]\nmax_connections = %d\n[admin]\nlisten = %q\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n[pool.p]\n[[pool.p.backend]]\naddr = %q\n",
			max, adm, front, b1.Addr)
	}
	in, path := startFile(t, render(50))
	metric := func() string {
		t.Helper()
		resp, err := http.Get("http://" + adm + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "l4lb_client_connections_max ") {
				return line
			}
		}
		t.Fatalf("no l4lb_client_connections_max in /metrics")
		return ""
	}
	if got := metric(); got != "l4lb_client_connections_max 50" {
		t.Fatalf("before the reload: %q", got)
	}
	if err := os.WriteFile(path, []byte(render(60)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs := in.reload(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := metric(); got != "l4lb_client_connections_max 60" {
		t.Fatalf("after reloading max_connections = 60 the metric still says %q", got)
	}
}
