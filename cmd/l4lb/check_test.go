package main

import (
	"bytes"
	"fmt"
	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/pkg/server"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkFile runs "l4lb check" on src and returns the exit code and output.
func checkFile(t *testing.T, src string) (code int, stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code = run([]string{"check", "-config", path}, &out, &errb)
	return code, out.String(), strings.ReplaceAll(errb.String(), path, "l4lb.toml")
}

// onePool is a file with the given listeners (bind values) in front of
// pool p, whose table holds poolKeys and then the given backend tables.
func onePool(binds []string, poolKeys string, backends ...string) string {
	var b strings.Builder
	b.WriteString("[admin]\nlisten = \"\"\n")
	for i, bind := range binds {
		fmt.Fprintf(&b, "[[listener]]\nname = \"l%d\"\nbind = %q\npool = \"p\"\n", i, bind)
	}
	b.WriteString("[pool.p]\n" + poolKeys)
	for _, be := range backends {
		b.WriteString("[[pool.p.backend]]\n" + be)
	}
	return b.String()
}

// hostAddr returns a non-loopback IPv4 address of this host, or "".
func hostAddr(t *testing.T) string {
	h, err := server.ThisHost()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range h.Addrs {
		if a := p.Addr(); a.Is4() && !a.IsLoopback() {
			return a.String()
		}
	}
	return ""
}

// TestCheckRefusesWhatRunCannotServe covers what run used to refuse, or
// serve badly, after check had said ok (issue 8): check now names the key
// and line of each.
func TestCheckRefusesWhatRunCannotServe(t *testing.T) {
	heavy := "addr = \"127.0.0.1:9001\"\nweight = 256\n"
	tests := []struct {
		name, src string
		want      []string // in the output, in order
	}{
		{"consistent-hash ring too large", onePool([]string{"127.0.0.1:8080"}, "algorithm = \"consistent-hash\"\nring_vnodes = 10000\n", heavy, strings.Replace(heavy, "9001", "9002", 1)),
			[]string{"l4lb.toml:9: pool.p.ring_vnodes: the consistent-hash ring would have 5120000 points", "1 error(s)"}},
		{"wildcard and specific bind on one port", onePool([]string{"0.0.0.0:8080", "127.0.0.1:8080"}, "", "addr = \"127.0.0.1:9001\"\n"),
			[]string{"l4lb.toml:9: listener[1].bind: bind \"127.0.0.1:8080\" collides with listener[0] \"0.0.0.0:8080\" (line 3)"}},
		{"IPv6 wildcard and loopback on one port", onePool([]string{"[::1]:8080", "[::]:8080"}, "", "addr = \"127.0.0.1:9001\"\n"),
			[]string{"l4lb.toml:9: listener[1].bind:", "[::]:8080 already takes port 8080 on every local IPv6 address"}},
		{"every weight 0 under weighted round robin", onePool([]string{"127.0.0.1:8080"}, "algorithm = \"weighted-round-robin\"\n", "addr = \"127.0.0.1:9001\"\nweight = 0\n", "addr = \"127.0.0.1:9002\"\nweight = 0\n"),
			[]string{"l4lb.toml:14: pool.p.backend[1].weight: every backend of the pool has weight 0"}},
		{"broadcast backend", onePool([]string{"127.0.0.1:8080"}, "", "addr = \"255.255.255.255:9001\"\n"),
			[]string{"l4lb.toml:9: pool.p.backend[0].addr:", "is the broadcast address"}},
		{"backend that is the listener", onePool([]string{"127.0.0.1:8080"}, "", "addr = \"127.0.0.1:8080\"\n"),
			[]string{"l4lb.toml:9: pool.p.backend[0].addr:", "l4lb would connect to itself, in a loop"}},
		{"loopback backend under a wildcard listener", onePool([]string{"0.0.0.0:8080"}, "", "addr = \"127.0.0.1:8080\"\n"),
			[]string{"l4lb.toml:9: pool.p.backend[0].addr:", "is a loopback address, where listener[0]"}},
		{"not a valid IP", onePool([]string{"127.0.0.1:8080"}, "", "addr = \"300.1.2.3:9001\"\n"),
			[]string{"is not a valid IP address"}},
	}
	if a := hostAddr(t); a != "" {
		tests = append(tests, struct {
			name, src string
			want      []string
		}{"interface address under a wildcard listener", onePool([]string{"0.0.0.0:8080"}, "", "addr = \""+a+":8080\"\n"),
			[]string{"l4lb.toml:9: pool.p.backend[0].addr:", "is an address of this host, where listener[0]", "in a loop"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := checkFile(t, tt.src)
			if code != 1 || stdout != "" {
				t.Fatalf("check: exit %d, stdout %q, want exit 1 and errors only; stderr:\n%s", code, stdout, stderr)
			}
			rest := stderr
			for _, want := range tt.want {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("check output lacks %q (in order):\n%s", want, stderr)
				}
				rest = rest[i+len(want):]
			}
			if strings.Contains(stderr, "does not resolve DNS") {
				t.Errorf("check gives the DNS hint for an address:\n%s", stderr)
			}
		})
	}
}

// TestCheckReadsTheAdminToken: run reads [admin] token_file at start, so
// check refuses one it cannot read.
func TestCheckReadsTheAdminToken(t *testing.T) {
	src := "[admin]\nlisten = \"127.0.0.1:9090\"\ntoken_file = \"/nonexistent/l4lb.token\"\n" +
		"[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:8080\"\npool = \"p\"\n[pool.p]\n[[pool.p.backend]]\naddr = \"127.0.0.1:9001\"\n"
	code, _, stderr := checkFile(t, src)
	if code != 1 || !strings.Contains(stderr, "l4lb.toml:3: admin.token_file: cannot read the admin token") {
		t.Fatalf("check: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestCheckReportsUDP: a good file with UDP listeners is summed up by
// protocol, with the sessions its UDP listeners may hold; a file with UDP
// mistakes gets them named by key and line like any other.
func TestCheckReportsUDP(t *testing.T) {
	udp := "[admin]\nlisten = \"\"\n" +
		"[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n" +
		"[[listener]]\nname = \"dns\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"udp\"\npool = \"dns\"\nmax_sessions = 1000\n" +
		"[pool.web]\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n" +
		"[pool.dns]\nreply_timeout = \"1s\"\n[[pool.dns.backend]]\naddr = \"127.0.0.1:9053\"\n[[pool.dns.backend]]\naddr = \"127.0.0.1:9054\"\n" +
		"[pool.dns.health]\ntype = \"send-expect\"\nsend_hex = \"0001\"\n"
	tests := []struct {
		name, src string
		code      int
		want      []string // in stdout (code 0) or stderr, in order
	}{
		{"tcp only: the summary of old", onePool([]string{"127.0.0.1:8080"}, "", "addr = \"127.0.0.1:9001\"\n"), 0,
			[]string{"l4lb.toml: ok (1 listeners, 1 pools, 1 backends)\n"}},
		{"tcp and udp on one address", udp, 0,
			[]string{"l4lb.toml: ok (2 listeners: 1 tcp, 1 udp; 2 pools: 1 tcp, 1 udp; 3 backends; udp sessions up to 1000)\n"}},
		{"udp mistakes", strings.Replace(strings.Replace(udp, "max_sessions = 1000", "backlog = 10", 1), "reply_timeout = \"1s\"", "idle_timeout = \"1m\"", 1), 1,
			[]string{"l4lb.toml:12: listener[1].backlog: only for protocol = \"tcp\" listeners",
				"l4lb.toml:17: pool.dns.idle_timeout: idle_timeout is for TCP pools, and this pool serves udp listener[1] \"dns\" (line 7): UDP sessions end after the listener's session_timeout",
				"2 error(s)"}},
		{"a pool of both protocols", strings.Replace(udp, "pool = \"dns\"", "pool = \"web\"", 1), 1,
			[]string{"l4lb.toml:11: listener[1].pool: pool \"web\" is also served by tcp listener[0] \"web\" (line 3), and this listener is udp: a pool serves one protocol: define a second pool with the same backends",
				// Pool dns is named by no listener now: a TCP pool.
				"l4lb.toml:17: pool.dns.reply_timeout: reply_timeout is for UDP pools, and no listener names this pool, so it is a TCP pool",
				"2 error(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := checkFile(t, tt.src)
			out := stderr
			if tt.code == 0 {
				out = strings.ReplaceAll(stdout, checkPath(t, stdout), "l4lb.toml")
			}
			if code != tt.code {
				t.Fatalf("check: exit %d, want %d; stdout %q, stderr:\n%s", code, tt.code, stdout, stderr)
			}
			rest := out
			for _, want := range tt.want {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("check output lacks %q (in order):\n%s", want, out)
				}
				rest = rest[i+len(want):]
			}
		})
	}
}

// checkPath is the file name check printed on its ok line.
func checkPath(t *testing.T, stdout string) string {
	t.Helper()
	path, _, ok := strings.Cut(stdout, ": ok (")
	if !ok {
		t.Fatalf("no ok line in %q", stdout)
	}
	return path
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good, _, _ := e2eutil.WriteConfig(t, dir, []string{"127.0.0.1:9"}, "")
	var out, errb bytes.Buffer
	if code := run([]string{"check", "-config", good}, &out, &errb); code != 0 || !strings.Contains(out.String(), ": ok") {
		t.Fatalf("check of a good file: code %d, out %q, err %q", code, out.String(), errb.String())
	}
	if code := run([]string{"check", "-config", "../../config.toml"}, &out, &errb); code != 0 {
		t.Fatalf("the shipped config.toml fails check: %s", errb.String())
	}

	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte(`[global]
shutdown_timeout = "soon"
[[listener]]
name = "a"
bind = "127.0.0.1:8080"
pool = "missing"
colour = "blue"
`), 0o644)
	out.Reset()
	errb.Reset()
	code := run([]string{"check", "-config", bad}, &out, &errb)
	msg := errb.String()
	if code != 1 {
		t.Fatalf("check of a bad file: exit %d, want 1", code)
	}
	for _, want := range []string{"bad.toml:2: global.shutdown_timeout", "bad.toml:6:", "missing", "bad.toml:7:", "colour"} {
		if !strings.Contains(msg, want) {
			t.Errorf("check output lacks %q:\n%s", want, msg)
		}
	}
}

// A file check accepts with advice still exits 0, and prints each piece of
// advice as a warning with its line: a Maglev pool of 1,000 backends at
// the default table size is told the prime to use.
func TestCheckPrintsAdvice(t *testing.T) {
	var b strings.Builder
	b.WriteString("[[listener]]\nname = \"l\"\nbind = \"127.0.0.1:8080\"\npool = \"p\"\n[pool.p]\nalgorithm = \"maglev\"\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = \"10.1.%d.%d:80\"\n", i/250, i%250+1)
	}
	path := filepath.Join(t.TempDir(), "maglev.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check", "-config", path}, &out, &errb); code != 0 {
		t.Fatalf("check: exit %d, err %q", code, errb.String())
	}
	if want := "warning: " + path + ":5: pool.p.maglev_table_size: 65537 slots for 1000 backends"; !strings.Contains(out.String(), want) {
		t.Fatalf("check output %q lacks %q", out.String(), want)
	}
	if !strings.Contains(out.String(), "e.g. 100003") {
		t.Fatalf("check output %q does not name the prime", out.String())
	}
}
