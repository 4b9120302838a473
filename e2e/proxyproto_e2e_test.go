package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// TestProxyProtocolToRealBackends runs l4lb's PROXY protocol against
// programs no one here wrote, which read and write the header themselves:
//
// To backends ([pool.NAME] proxy_protocol = "v1" | "v2"), for each version
// and for an IPv4 client (l4lb listening on 127.0.0.1) and an IPv6 one
// (on [::1]):
//
//   - nginx's stream module, "listen ... proxy_protocol", answers with
//     return "nginx $proxy_protocol_addr $proxy_protocol_port
//     $proxy_protocol_server_addr $proxy_protocol_server_port": the
//     client reads back what nginx parsed, and it must be its own address
//     and port (its socket's local address) and the address it connected
//     to (l4lb's listener). The backend connection is of the client's
//     family, so the header's family matches the connection's.
//   - HAProxy, mode tcp, "bind ... accept-proxy". HAProxy cannot answer a
//     TCP client by itself, so it relays to a Go echo with send-proxy-v2:
//     HAProxy sends on, as the connection's source and destination, what
//     it parsed from l4lb's header, and the echo answers with it. HAProxy
//     also logs "%ci %cp %fi %fp" (its client and frontend address, which
//     accept-proxy replaces with the header's) to its stdout, checked too,
//     so the assertion does not rest on the relay alone. HAProxy listens
//     on the other family than the client's: an IPv4 client's header
//     travels over an IPv6 backend connection and the other way round.
//   - A Go backend that parses with pkg/proxyproto and answers the same
//     words behind the version it read: nginx and HAProxy take either
//     version alike, so it is the one that shows a pool sends its own.
//
// From a front proxy ([[listener]] accept_proxy = true, trusted_proxies
// 127.0.0.0/8 and ::1/128), a chain of two PROXY hops whose every header
// is written or read by a real peer on one side:
//
//   - client -> nginx (proxy_pass, "proxy_protocol on": v1) -> l4lb ->
//     pool "v2" -> a Go backend that parses with pkg/proxyproto. The
//     client writes its first bytes at once, so they come with nginx's
//     header; they must reach the backend after it, whole.
//   - client -> HAProxy (send-proxy-v2, with TLVs after the addresses:
//     a CRC32C and a unique ID) -> l4lb -> pool "v1" -> nginx (listen ...
//     proxy_protocol, the return above).
//
// In both the client's original address and the address it connected to
// (the front proxy's) must survive both hops; l4lb's access log must name
// the original client too. The front proxy reaches l4lb over the client's
// family (so ::1/128 is the trusted entry for IPv6 clients).
//
// And l4lb's send-expect health checks of those pools, which send a LOCAL
// header (v2) or "PROXY UNKNOWN" (v1) and no bytes of their own, pass on
// nginx and HAProxy (the real readers take those headers) and on the Go
// backend, which says it read a LOCAL header of the pool's version; none
// fails.
//
// One nginx, one HAProxy and one l4lb serve every case: each case is a
// listener of its own. Without nginx, its stream module or haproxy the
// test skips, unless CI is set (.ci/run installs them); without IPv6
// loopback the IPv6 cases skip.
func TestProxyProtocolToRealBackends(t *testing.T) {
	tools := needProxyTools(t)
	testnet.CheckLeaks(t)
	dir := t.TempDir()

	type family struct{ name, host, other string }
	families := []family{{"ipv4", "127.0.0.1", "::1"}}
	if testnet.HasIPv6() {
		families = append(families, family{"ipv6", "::1", "127.0.0.1"})
	}
	hp := func(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	versions := []string{"v1", "v2"}
	kinds := []string{"nginx", "haproxy", "go"} // backends of the "to" cases

	// Backends written in Go.
	behindHAProxy := startProxyEcho(t, "via-haproxy") // HAProxy relays to it
	direct := startProxyEcho(t, "direct")             // l4lb's pools "to-go-*"
	final := startProxyEcho(t, "final")               // the end of the nginx -> l4lb chain

	// Ports. FreePort checks 127.0.0.1 only; nginx and HAProxy take the
	// same number on ::1.
	nginxBack, haproxyBack := testnet.FreePort(t), testnet.FreePort(t)
	nginxFront, haproxyFront, l4lbListen := map[string]int{}, map[string]int{}, map[string]int{}
	for _, f := range families {
		nginxFront[f.name], haproxyFront[f.name] = testnet.FreePort(t), testnet.FreePort(t)
		for _, name := range []string{"from-nginx-" + f.name, "from-haproxy-" + f.name} {
			l4lbListen[name] = testnet.FreePort(t)
		}
		for _, v := range versions {
			for _, kind := range kinds {
				l4lbListen[ppToName(kind, v, f.name)] = testnet.FreePort(t)
			}
		}
	}

	// nginx: one process (master_process off), so killing its pid ends
	// it all; error log and pid file in the test's directory.
	var nc strings.Builder
	if tools.streamModule != "" {
		fmt.Fprintf(&nc, "load_module %s;\n", tools.streamModule)
	}
	nginxErr := filepath.Join(dir, "nginx.err")
	fmt.Fprintf(&nc, "daemon off;\nmaster_process off;\npid %s;\nerror_log %s info;\n", filepath.Join(dir, "nginx.pid"), nginxErr)
	nc.WriteString("events { worker_connections 1024; }\nstream {\n")
	// An access log for the failure output: every session, what nginx
	// read from its header, how it ended and when.
	nginxAccess := filepath.Join(dir, "nginx.access")
	fmt.Fprintf(&nc, "    log_format pp '$msec $remote_addr $remote_port -> $server_addr $server_port pp=$proxy_protocol_addr $proxy_protocol_port status=$status in=$bytes_received out=$bytes_sent time=$session_time';\n")
	fmt.Fprintf(&nc, "    access_log %s pp;\n", nginxAccess)
	nc.WriteString("    server {\n")
	for _, f := range families {
		fmt.Fprintf(&nc, "        listen %s proxy_protocol;\n", hp(f.host, nginxBack))
	}
	nc.WriteString("        return \"nginx $proxy_protocol_addr $proxy_protocol_port $proxy_protocol_server_addr $proxy_protocol_server_port\\n\";\n    }\n")
	for _, f := range families {
		fmt.Fprintf(&nc, "    server {\n        listen %s;\n        proxy_pass %s;\n        proxy_protocol on;\n    }\n",
			hp(f.host, nginxFront[f.name]), hp(f.host, l4lbListen["from-nginx-"+f.name]))
	}
	nc.WriteString("}\n")
	nginxConf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(nginxConf, []byte(nc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	nginx := ppStartChild(t, "nginx", tools.nginx, []string{nginxErr, nginxAccess, nginxConf}, "-p", dir, "-c", nginxConf, "-e", nginxErr)

	// HAProxy in the foreground (-db): one process.
	var hc strings.Builder
	hc.WriteString("global\n    nbthread 1\n    log stdout format raw local0\n")
	hc.WriteString("defaults\n    mode tcp\n    log global\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n")
	hc.WriteString("listen backend\n")
	for _, f := range families {
		fmt.Fprintf(&hc, "    bind %s accept-proxy\n", hp(f.host, haproxyBack))
	}
	fmt.Fprintf(&hc, "    option logasap\n    log-format \"haproxy-saw %%ci %%cp %%fi %%fp\"\n    server echo %s send-proxy-v2\n", behindHAProxy.addr)
	for _, f := range families {
		// With TLVs after the addresses (a CRC32C and a unique ID), which
		// l4lb must skip.
		fmt.Fprintf(&hc, "listen front-%s\n    bind %s\n    unique-id-format \"l4lb-test-%%ci-%%cp-%%rt\"\n", f.name, hp(f.host, haproxyFront[f.name]))
		fmt.Fprintf(&hc, "    server l4lb %s send-proxy-v2 proxy-v2-options crc32c,unique-id\n", hp(f.host, l4lbListen["from-haproxy-"+f.name]))
	}
	haproxyConf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(haproxyConf, []byte(hc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tools.haproxy, "-c", "-q", "-f", haproxyConf).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, hc.String())
	}
	haproxy := ppStartChild(t, "haproxy", tools.haproxy, []string{haproxyConf}, "-db", "-f", haproxyConf)

	// Each binds every address before it serves any: one port each tells
	// they are up.
	waitAccepting(t, "nginx", nginx, hp("127.0.0.1", nginxBack))
	waitAccepting(t, "haproxy", haproxy, hp("127.0.0.1", haproxyBack))

	// l4lb: a listener and a pool per case; the access log (JSON, to a
	// file) says which client each connection was from.
	access := filepath.Join(dir, "access.log")
	var lc strings.Builder
	admin := testnet.FreeAddr(t)
	fmt.Fprintf(&lc, "[admin]\nlisten = %q\n[log]\nlevel = \"debug\"\naccess = \"json\"\naccess_file = %q\n", admin, access)
	pools := map[string]string{} // pool name -> its TOML
	// pool adds a pool of one backend. With expect set its health check
	// is send-expect, sending nothing but the PROXY header of the LOCAL
	// kind l4lb puts before a check's bytes, and expecting the start of
	// the backend's answer: the real backends must take that header too.
	// Otherwise the default connect check. The timeout is above the 1s of
	// a first SYN retransmission, which a loaded host sometimes needs.
	pool := func(name, version, backend, expect string) {
		text := fmt.Sprintf("[pool.%s]\nalgorithm = \"round-robin\"\nproxy_protocol = %q\n[[pool.%s.backend]]\naddr = %q\n", name, version, name, backend)
		if expect != "" {
			text += fmt.Sprintf("[pool.%s.health]\ntype = \"send-expect\"\nsend = \"\"\nexpect = %q\ninterval = \"1500ms\"\ntimeout = \"1500ms\"\n", name, expect)
		}
		pools[name] = text
	}
	for _, f := range families {
		for _, v := range versions {
			for _, kind := range kinds {
				name := ppToName(kind, v, f.name)
				fmt.Fprintf(&lc, "[[listener]]\nname = %q\nbind = %q\npool = %q\n", name, hp(f.host, l4lbListen[name]), name)
			}
			pool(ppToName("nginx", v, f.name), v, hp(f.host, nginxBack), "nginx ")
			pool(ppToName("haproxy", v, f.name), v, hp(f.other, haproxyBack), "via-haproxy v2 ")
			// The Go backend tells the version: a check's header must be
			// a LOCAL one of the pool's version.
			pool(ppToName("go", v, f.name), v, direct.addr, "direct "+v+" local\n")
		}
		for _, via := range []string{"nginx", "haproxy"} {
			name := "from-" + via + "-" + f.name
			p := "accepted-to-go" // nginx sends v1; on as v2 to the Go backend
			if via == "haproxy" {
				p = "accepted-to-nginx" // HAProxy sends v2; on as v1 to nginx
			}
			fmt.Fprintf(&lc, "[[listener]]\nname = %q\nbind = %q\npool = %q\naccept_proxy = true\ntrusted_proxies = [\"127.0.0.0/8\", \"::1/128\"]\n",
				name, hp(f.host, l4lbListen[name]), p)
		}
	}
	pool("accepted-to-go", "v2", final.addr, "")
	pool("accepted-to-nginx", "v1", hp("127.0.0.1", nginxBack), "")
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		lc.WriteString(pools[name])
	}
	l4lbConf := filepath.Join(dir, "l4lb.toml")
	if err := os.WriteFile(l4lbConf, []byte(lc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	l4lb := startL4LB(t, "", nil, "-config", l4lbConf)
	ppWaitLog(t, "l4lb", l4lb, "l4lb running") // every listener bound
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(access)
			t.Logf("l4lb access log:\n%s", data)
			t.Logf("l4lb config:\n%s", lc.String())
		}
	})

	// dial connects a client to addr, with a deadline for the whole case.
	dial := func(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(15 * time.Second))
		// What the client is and what it connected to, as its own socket
		// says: the words every backend must read back.
		words := ppAddrWords(ppAddrPort(t, c.LocalAddr()), ppAddrPort(t, c.RemoteAddr()))
		return c, bufio.NewReader(c), words
	}
	readLine := func(t *testing.T, r *bufio.Reader, what, want string) {
		t.Helper()
		line, err := r.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("%s answered %q (%v), want %q", what, line, err, want)
		}
	}
	// nginx's return closes the connection after its line: nothing more
	// may come.
	readEOF := func(t *testing.T, r *bufio.Reader, what string) {
		t.Helper()
		if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
			t.Fatalf("after %s's line: %q (%v), want a clean end", what, rest, err)
		}
	}
	echo := func(t *testing.T, c net.Conn, r *bufio.Reader, msg string) {
		t.Helper()
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		readLine(t, r, "the echo", msg)
	}
	// accessLine waits for l4lb's access line of the connection from
	// client on listener and checks it names client.
	accessLine := func(t *testing.T, listener string, c net.Conn) {
		t.Helper()
		client := c.LocalAddr().String()
		c.Close()
		var line map[string]any
		testnet.Eventually(t, fmt.Sprintf("l4lb's access line of client %s on %s", client, listener), func() bool {
			data, _ := os.ReadFile(access)
			for s := range strings.SplitSeq(string(data), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(s), &m) == nil && m["listener"] == listener && m["client"] == client {
					line = m
					return true
				}
			}
			return false
		})
		if line["result"] != "ok" {
			t.Errorf("access line %v: want result ok", line)
		}
	}

	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			for _, f := range []family{{"ipv4", "127.0.0.1", "::1"}, {"ipv6", "::1", "127.0.0.1"}} {
				t.Run(f.name, func(t *testing.T) {
					if _, ok := l4lbListen[ppToName("nginx", v, f.name)]; !ok {
						t.Skip("no IPv6 loopback on this host")
					}
					t.Run("nginx", func(t *testing.T) {
						name := ppToName("nginx", v, f.name)
						c, r, words := dial(t, hp(f.host, l4lbListen[name]))
						readLine(t, r, "nginx", "nginx "+words+"\n")
						readEOF(t, r, "nginx")
						accessLine(t, name, c)
					})
					t.Run("haproxy", func(t *testing.T) {
						name := ppToName("haproxy", v, f.name)
						c, r, words := dial(t, hp(f.host, l4lbListen[name]))
						readLine(t, r, "the echo behind HAProxy", "via-haproxy v2 "+words+"\n")
						echo(t, c, r, "ping through HAProxy\n")
						accessLine(t, name, c)
						testnet.Eventually(t, "HAProxy's log line of "+words, func() bool {
							return strings.Contains(haproxy.stdout.String(), "haproxy-saw "+words+"\n")
						})
					})
					// nginx and HAProxy read either version alike: the
					// Go backend says which one came.
					t.Run("go", func(t *testing.T) {
						name := ppToName("go", v, f.name)
						c, r, words := dial(t, hp(f.host, l4lbListen[name]))
						readLine(t, r, "the Go backend", "direct "+v+" "+words+"\n")
						echo(t, c, r, "ping\n")
						accessLine(t, name, c)
					})
				})
			}
		})
	}
	t.Run("accept", func(t *testing.T) {
		for _, f := range []family{{"ipv4", "127.0.0.1", "::1"}, {"ipv6", "::1", "127.0.0.1"}} {
			t.Run(f.name, func(t *testing.T) {
				if _, ok := nginxFront[f.name]; !ok {
					t.Skip("no IPv6 loopback on this host")
				}
				t.Run("nginx-v1-to-l4lb-v2-to-go", func(t *testing.T) {
					c, r, words := dial(t, hp(f.host, nginxFront[f.name]))
					// At once: these bytes go out with nginx's header.
					if _, err := io.WriteString(c, "early bytes\n"); err != nil {
						t.Fatal(err)
					}
					readLine(t, r, "the Go backend behind nginx and l4lb", "final v2 "+words+"\n")
					readLine(t, r, "the Go backend's echo of the early bytes", "early bytes\n")
					echo(t, c, r, "later bytes\n")
					accessLine(t, "from-nginx-"+f.name, c)
				})
				t.Run("haproxy-v2-to-l4lb-v1-to-nginx", func(t *testing.T) {
					c, r, words := dial(t, hp(f.host, haproxyFront[f.name]))
					readLine(t, r, "nginx behind HAProxy and l4lb", "nginx "+words+"\n")
					readEOF(t, r, "nginx")
					accessLine(t, "from-haproxy-"+f.name, c)
				})
			})
		}
	})

	// l4lb's send-expect checks of the "to" pools, a LOCAL header (v2) or
	// "PROXY UNKNOWN" (v1) and no bytes of their own, pass on every
	// backend, at least twice each.
	t.Run("health-checks", func(t *testing.T) {
		type check struct{ pool, backend string }
		var checks []check
		for _, f := range families {
			for _, v := range versions {
				for _, kind := range kinds {
					backend := map[string]string{"nginx": hp(f.host, nginxBack), "haproxy": hp(f.other, haproxyBack), "go": direct.addr}[kind]
					checks = append(checks, check{ppToName(kind, v, f.name), backend})
				}
			}
		}
		series := func(c check, result string) string {
			return fmt.Sprintf("l4lb_backend_dials_total{backend=%q,kind=\"health\",pool=%q,result=%q}", c.backend, c.pool, result)
		}
		// Polled at a gentle pace: l4lb renders /metrics for each look,
		// and a busy l4lb is slow to run its checks.
		deadline := time.Now().Add(30 * time.Second)
		for {
			m := ppMetrics(t, admin)
			var short, failed []string
			for _, c := range checks {
				if m[series(c, "success")] < 2 {
					short = append(short, c.pool)
				}
				if n := m[series(c, "failure")]; n > 0 {
					failed = append(failed, fmt.Sprintf("%s: %v", c.pool, n))
				}
			}
			if len(short) == 0 {
				// A failed check beside passes is not a header the
				// backend refused (the readers' logs and the Go
				// backends are checked for that below): it is a check
				// that ran out of time, which a starved l4lb does on a
				// loaded host. Said, not failed.
				if len(failed) > 0 {
					t.Logf("some checks failed beside their passes (timeouts on a loaded host?): %s", strings.Join(failed, ", "))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("health checks that did not pass twice in 30s: %s\nl4lb's counts:\n%s", strings.Join(short, ", "), ppHealthLines(m))
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	// No header any reader refused: not from a client, not from a health
	// check. (A connect and a close, as l4lb's connect checks and
	// ppWaitAccepting make, is `broken header: ""` to nginx: nothing read;
	// "Connection closed while waiting for PROXY protocol header" to
	// HAProxy.)
	if data, _ := os.ReadFile(nginxErr); regexp.MustCompile(`broken header: "[^"]`).Match(data) {
		t.Errorf("nginx refused a PROXY header:\n%s", data)
	}
	haproxyRefused := regexp.MustCompile(`Truncated PROXY|does not look like a PROXY|invalid PROXY|unhandled protocol in the PROXY`)
	if out := haproxy.stdout.String() + haproxy.stderr.String(); haproxyRefused.MatchString(out) {
		t.Errorf("HAProxy refused a PROXY header:\n%s", out)
	}
	for _, e := range []*proxyEcho{behindHAProxy, direct, final} {
		if n := e.refused.Load(); n > 0 {
			t.Errorf("the Go backend %q refused %d PROXY headers", e.tag, n)
		}
	}
	for _, line := range strings.Split(l4lb.stderr.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Logf("l4lb: %s", line)
		}
	}
}

// ppToName names the listener and pool of a case towards a backend.
func ppToName(kind, version, family string) string {
	return "to-" + kind + "-" + version + "-" + family
}

// ppHTTP keeps no connection open: the leak check counts them.
var ppHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// ppMetrics reads every series of l4lb's /metrics at admin.
func ppMetrics(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	resp, err := ppHTTP.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				out[line[:i]] = v
			}
		}
	}
	return out
}

// ppHealthLines are the health check counts of m, sorted.
func ppHealthLines(m map[string]float64) string {
	var out []string
	for k, v := range m {
		if strings.Contains(k, `kind="health"`) {
			out = append(out, fmt.Sprintf("%s %v", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
