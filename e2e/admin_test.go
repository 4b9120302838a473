package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// withNofile is an executable that runs l4lb with its fd limit (soft and
// hard) lowered to n before anything opens, as LimitNOFILE= does under
// systemd: a shell that sets it and execs l4lb, whose pid it keeps.
func withNofile(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l4lb-nofile")
	script := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 3\nexec %s \"$@\"\n", n, l4lbBin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// adminConfig writes a one-listener config in front of backend with admin
// keys of its own and returns its path, the listener and admin addresses.
func adminConfig(t *testing.T, backend, adminKeys string) (path, listen, adminAddr string) {
	t.Helper()
	listen, adminAddr = testnet.FreeAddr(t), testnet.FreeAddr(t)
	path = filepath.Join(t.TempDir(), "l4lb.toml")
	text := fmt.Sprintf(`[admin]
listen = %q
%s
[[listener]]
name = "front"
bind = %q
pool = "p"
[pool.p]
[[pool.p.backend]]
addr = %q
`, adminAddr, adminKeys, listen, backend)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listen, adminAddr
}

func post(t *testing.T, url, auth string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAdminTokenFile(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	path, listen, adminAddr := adminConfig(t, b.Addr, fmt.Sprintf("token_file = %q", tokenFile))
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)
	// The data listeners listen from the moment they are bound, before
	// the admin endpoint starts.
	waitAccepting(t, "l4lb admin", p, adminAddr)

	url := "http://" + adminAddr + "/api/v1/pools/p/backends/" + b.Addr + "/disable"
	if code := post(t, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d, want 401", code)
	}
	if code := post(t, url, "Bearer s3cret"); code != http.StatusOK {
		t.Fatalf("POST with the token: %d, want 200", code)
	}
	if v := e2eutil.Metric(t, adminAddr, `l4lb_backend_disabled{backend="`+b.Addr+`",pool="p"}`); v != 1 {
		t.Fatalf("backend_disabled %v after the authenticated disable", v)
	}
}

// A token file that cannot be used stops l4lb at start, naming the file.
func TestAdminBadTokenFileFailsStart(t *testing.T) {
	for name, content := range map[string]*string{"missing": nil, "empty": new(string)} {
		t.Run(name, func(t *testing.T) {
			testnet.CheckLeaks(t) // a start that fails leaves nothing running
			tokenFile := filepath.Join(t.TempDir(), "token")
			if content != nil {
				os.WriteFile(tokenFile, []byte(*content), 0o600)
			}
			path, _, _ := adminConfig(t, "127.0.0.1:9", fmt.Sprintf("token_file = %q", tokenFile))
			var out, errb bytes.Buffer
			if code := runL4LB(t, []string{"-config", path}, &out, &errb); code != 1 || !strings.Contains(errb.String(), tokenFile) {
				t.Fatalf("exit %d, stderr %q: want 1 and an error naming %s", code, errb.String(), tokenFile)
			}
		})
	}
}

// Idle admin connections cannot take the data path's fds: under a low fd
// limit, 200 admin connections held open leave every client connection up
// to max_connections served.
func TestAdminConnectionsLeaveTheDataPathItsFds(t *testing.T) {
	const adminConns = 200
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	path, listen, adminAddr := adminConfig(t, b.Addr, "")
	p := startL4LB(t, withNofile(t, 256), nil, "-config", path)
	waitServing(t, p, listen)
	// The data listeners listen from the moment they are bound, before
	// the admin endpoint starts.
	waitAccepting(t, "l4lb admin", p, adminAddr)
	var m []string
	testnet.Eventually(t, "max_connections in the start log", func() bool {
		m = regexp.MustCompile(`l4lb running.*max_connections=(\d+)`).FindStringSubmatch(p.stderr.String())
		return m != nil
	})
	maxConns, _ := strconv.Atoi(m[1])

	// Keep-alive connections after one request each: they hold their
	// slot for the idle timeout, long past this test.
	served := 0
	for range adminConns {
		c, err := net.DialTimeout("tcp", adminAddr, 10*time.Second)
		if errors.Is(err, syscall.ECONNRESET) {
			continue // refused so fast that the reset beat connect's return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "GET /api/v1/pools HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
			served++
		}
	}
	if served != 64 {
		t.Fatalf("%d of %d admin connections served, want the default cap of 64", served, adminConns)
	}

	for i := range maxConns {
		c, err := net.DialTimeout("tcp", listen, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if tag, err := bufio.NewReader(c).ReadString('\n'); tag != "b\n" {
			t.Fatalf("client %d of max_connections %d: %q %v, want served", i+1, maxConns, tag, err)
		}
	}
	if strings.Contains(p.stderr.String(), "too many open files") {
		t.Fatalf("l4lb ran out of fds:\n%s", p.stderr.String())
	}
}
