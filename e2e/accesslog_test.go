package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// accessConfig writes a one-listener config with the access log on, as
// JSON to file; health checks off, so every line is a client's.
func accessConfig(t *testing.T, backend, file string) (path, listen, adminAddr string) {
	return accessConfigWith(t, backend, file, "", "")
}

// accessConfigWith is accessConfig with logKeys added to [log] and more
// (listeners, pools) appended.
func accessConfigWith(t *testing.T, backend, file, logKeys, more string) (path, listen, adminAddr string) {
	t.Helper()
	return logConfig(t, backend, fmt.Sprintf("access = \"json\"\naccess_file = %q\n", file)+logKeys, more)
}

// logConfig writes a one-listener config with the [log] keys logKeys and
// more (listeners, pools) appended; health checks off, so every access
// record is a client's.
func logConfig(t *testing.T, backend, logKeys, more string) (path, listen, adminAddr string) {
	t.Helper()
	listen, adminAddr = testnet.FreeAddr(t), testnet.FreeAddr(t)
	path = filepath.Join(t.TempDir(), "l4lb.toml")
	text := fmt.Sprintf(`[admin]
listen = %q
[log]
%s[[listener]]
name = "front"
bind = %q
pool = "p"
[pool.p]
[[pool.p.backend]]
addr = %q
[pool.p.health]
enabled = false
`+more, adminAddr, logKeys, listen, backend)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listen, adminAddr
}

// l4lb with [log] access = "json" appends a line per client to its file,
// counts closes by reason and shows its build; the lines written before a
// SIGTERM are all in the file when it exits.
func TestAccessLogToAFile(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	file := filepath.Join(t.TempDir(), "access.log")
	path, listen, adminAddr := accessConfig(t, b.Addr, file)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)

	c, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if tag, err := r.ReadString('\n'); tag != "b\n" {
		c.Close()
		t.Fatalf("tag %q, %v; l4lb's counts:\n%s", tag, err, clientCounts(t, adminAddr))
	}
	c.(*net.TCPConn).CloseWrite()
	io.ReadAll(r)
	c.Close()
	client := c.LocalAddr().String()
	var line map[string]any
	testnet.Eventually(t, "the client's access line", func() bool {
		data, _ := os.ReadFile(file)
		for _, s := range strings.Split(string(data), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(s), &m) == nil && m["client"] == client {
				line = m
				return true
			}
		}
		return false
	})
	for k, v := range map[string]any{"listener": "front", "pool": "p", "backend": b.Addr, "to_backend": 0.0,
		"to_client": 2.0, "reason": "completed", "result": "ok"} {
		if line[k] != v {
			t.Errorf("access line %s = %v, want %v (%v)", k, line[k], v, line)
		}
	}
	if v := e2eutil.Metric(t, adminAddr, `l4lb_client_connections_closed_total{listener="front",reason="completed"}`); v < 1 {
		t.Errorf("closed_total completed = %v, want at least 1", v)
	}
	resp, err := http.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^l4lb_build_info\{goversion="` + regexp.QuoteMeta(runtime.Version()) + `",version="[^"]+"\} 1$`).Match(body) {
		t.Errorf("/metrics lacks l4lb_build_info")
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("access log %v, %v: want mode 0640", st, err)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

// An access log l4lb cannot append to stops it at start, naming the key.
func TestAccessLogUnwritableFailsStart(t *testing.T) {
	testnet.CheckLeaks(t)
	file := filepath.Join(t.TempDir(), "missing", "access.log")
	path, _, _ := accessConfig(t, "127.0.0.1:9", file)
	var out, errb bytes.Buffer
	if code := runL4LB(t, []string{"-config", path}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "log.access_file") {
		t.Fatalf("exit %d, stderr %q: want 1 and an error naming log.access_file", code, errb.String())
	}
}
