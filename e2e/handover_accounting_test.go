package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// A handed-over connection is accounted for as one connection: the new
// process counts it on its backend and among its open clients while it
// lasts (least-conn and the caps see it), and when it ends writes its one
// access line with the whole connection's bytes each way and its whole
// duration, from the accept in the old process; the old process writes
// none.
func TestHandoverKeepsTheAccounting(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	file := filepath.Join(t.TempDir(), "access.log")
	path, listen, adminAddr := accessConfig(t, b.Addr, file)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	installBytes(t, append([]byte("[global]\nshutdown_timeout = \"2s\"\n"), text...), path, 0o644)
	chain := startChain(t, l4lbBin, path)

	c := dialTCP(t, listen)
	greeting := make([]byte, 2)
	if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != "b\n" {
		t.Fatalf("greeting %q, %v", greeting, err)
	}
	accepted := time.Now() // after l4lb accepted the client
	echo := func(n int) {
		t.Helper()
		msg := patterned(n)
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("echo of %d bytes: %v (reset: %v)", n, err, isReset(err))
		}
		got := make([]byte, n)
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes: %v (reset: %v)", n, err, isReset(err))
		}
	}
	echo(1000)
	active := `l4lb_connections_active{backend="` + b.Addr + `",pool="p"}`

	old, served := chain.upgrade(t)
	gone := waitOldGone(t, old, served)
	echo(3000)
	if n := e2eutil.Metric(t, adminAddr, active); n != 1 {
		t.Errorf("the new process counts %v connections on the backend, want the adopted one", n)
	}
	if n := e2eutil.Metric(t, adminAddr, "l4lb_client_connections_open"); n != 1 {
		t.Errorf("the new process counts %v open clients, want the adopted one", n)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close: %d bytes, %v; want EOF", len(rest), err)
	}
	client := c.LocalAddr().String()
	var lines []map[string]any
	testnet.Eventually(t, "the client's access line", func() bool {
		lines = accessLines(t, file, client)
		return len(lines) > 0
	})
	testnet.Eventually(t, "the backend's count to drop", func() bool { return e2eutil.Metric(t, adminAddr, active) == 0 })
	if len(lines) != 1 {
		t.Fatalf("%d access lines for the client, want 1: %v", len(lines), lines)
	}
	line := lines[0]
	for k, v := range map[string]any{"listener": "front", "pool": "p", "backend": b.Addr,
		"to_backend": 4000.0, "to_client": 4002.0, "reason": "completed", "result": "ok"} {
		if line[k] != v {
			t.Errorf("access line %s = %v, want %v (%v)", k, line[k], v, line)
		}
	}
	if d, _ := line["duration"].(float64); d < gone.Sub(accepted).Seconds() {
		t.Errorf("access line duration %vs, want the whole connection's, at least the %v from its accept until the old process was gone", d, gone.Sub(accepted))
	}
}

// accessLines are the JSON access lines of client in file.
func accessLines(t *testing.T, file, client string) []map[string]any {
	t.Helper()
	data, _ := os.ReadFile(file)
	var out []map[string]any
	for _, s := range strings.Split(string(data), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil && m["client"] == client {
			out = append(out, m)
		}
	}
	return out
}
