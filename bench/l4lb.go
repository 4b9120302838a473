package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Failover detection settings for l4lb, comparable to HAProxy's
// fall 3 / rise 1 and nginx's max_fails=3 fail_timeout=5s.
const (
	l4lbBreakerFailures = 3
	l4lbBreakerCooldown = "5s"
)

// l4lbConfig renders an l4lb config (docs/configuration.md): one
// listener and one pool per route; health checks off where they would add connections the scenarios
// count, and the breaker as l4lb's own detection on the failover pool.
// UDP routes (udp scenario) get protocol = "udp", nginx's proxy_timeout as
// session_timeout, and on request/response responses = 1 (the session ends
// at the reply, as nginx's proxy_responses 1 does) with reuse_sockets
// (the harness's echo answers each request exactly once, the case the key
// is for); one-way sessions live until session_timeout. logKeys are more [log] keys (a variant's access
// log), or "".
func l4lbConfig(routes []route, acceptLoops int, logKeys string) string {
	return l4lbConfigWith(routes, acceptLoops, logKeys, l4lbKeys{})
}

// l4lbKeys are a variant's own keys, each block of lines ending in a
// newline: more of [global], and more of every TCP listener and every TCP
// pool.
type l4lbKeys struct {
	global, listener, pool string
}

// l4lbConfigWith is l4lbConfig with a variant's keys (l4lb-policy's,
// l4lb-busy's).
func l4lbConfigWith(routes []route, acceptLoops int, logKeys string, keys l4lbKeys) string {
	listenerKeys, poolKeys := keys.listener, keys.pool
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\nevent_loops = %d\npipe_size = 1048576\n%s\n", acceptLoops, keys.global)
	b.WriteString("[admin]\nlisten = \"\"\n\n[log]\nlevel = \"warn\"\n" + logKeys)
	for _, r := range routes {
		if err := checkLoopback(r.listen); err != nil {
			panic(err)
		}
		proto := "tcp"
		if r.udp != udpNone {
			proto = "udp"
		}
		fmt.Fprintf(&b, "\n[[listener]]\nname = %q\nbind = %q\nprotocol = %q\npool = %q\n", r.name, r.listen, proto, r.name)
		switch r.udp {
		case udpRRMode:
			fmt.Fprintf(&b, "session_timeout = %q\nmax_sessions = %d\n", udpSessionTimeout, udpRRMaxSessions)
		case udpOneWayMode, udpNoReplyMode:
			fmt.Fprintf(&b, "session_timeout = %q\nmax_sessions = %d\n", udpSessionTimeout, udpOWMaxSessions)
		}
		if r.udp == udpRRMode {
			b.WriteString("responses = 1\nreuse_sockets = true\n")
		}
		if r.udp == udpNone {
			b.WriteString(listenerKeys)
		}
		writeL4lbSNIRoutes(&b, r)
	}
	pool := func(name string, backends []string, udp udpMode) {
		fmt.Fprintf(&b, "\n[pool.%s]\nalgorithm = \"round-robin\"\n", name)
		if udp == udpNone {
			b.WriteString(poolKeys)
		}
		for _, be := range backends {
			fmt.Fprintf(&b, "\n[[pool.%s.backend]]\naddr = %q\n", name, be)
		}
		fmt.Fprintf(&b, "\n[pool.%s.health]\nenabled = false\n", name)
		if name == routeFailover {
			fmt.Fprintf(&b, "\n[pool.%s.breaker]\nfailures = %d\ncooldown = %q\n", name, l4lbBreakerFailures, l4lbBreakerCooldown)
		}
	}
	for _, r := range routes {
		pool(r.name, r.backends, r.udp)
		for _, p := range r.sni {
			pool(p.pool, []string{p.backend}, udpNone)
		}
	}
	return b.String()
}

// writeL4lbSNIRoutes gives the sni listener its inspect_timeout and one
// [[listener.route]] per name (docs/steering.md, "SNI routing"); the
// listener's own pool is the fallback. Nothing for other listeners.
func writeL4lbSNIRoutes(b *strings.Builder, r route) {
	if len(r.sni) == 0 {
		return
	}
	fmt.Fprintf(b, "inspect_timeout = %q\n", sniInspectTimeout)
	for _, p := range r.sni {
		fmt.Fprintf(b, "\n[[listener.route]]\nsni = [%q]\npool = %q\n", p.host, p.pool)
	}
}

// l4lbSystem is l4lb built from this tree; env (e.g. "GOMAXPROCS=1") makes
// a variant.
func l4lbSystem(name string, env []string) systemSpec {
	return l4lbVariant(name, env, "", nil)
}

// l4lbVariant is l4lbSystem with more to say about it (appended to its
// about line) and, when logKeys is set, more [log] keys, given the
// system's run directory.
func l4lbVariant(name string, env []string, more string, logKeys func(s *system) string) systemSpec {
	about := "l4lb from this tree"
	if len(env) > 0 {
		about += " with " + strings.Join(env, " ")
	}
	about += more
	return systemSpec{
		name: name, kind: KindSubject, fdsPerConn: 2, about: about,
		prepare: func(h *harness, s *system) error {
			_, err := h.l4lbBinary()
			return err
		},
		start: func(h *harness, s *system) (*child, error) {
			bin, err := h.l4lbBinary()
			if err != nil {
				return nil, err
			}
			if s.hasUDP() {
				c, err := startL4lb(h, s, bin, env, logKeys)
				if err == nil {
					return c, nil
				}
				// This tree may not serve UDP yet: run the TCP routes, and
				// the udp scenario says why l4lb has no row. The refused
				// config and its log stay beside the next (with -keep).
				_ = os.Rename(s.file("l4lb.toml"), s.file("l4lb-udp-refused.toml"))
				_ = os.Rename(s.file("l4lb.log"), s.file("l4lb-udp-refused.log"))
				moved := strings.NewReplacer("l4lb.toml", "l4lb-udp-refused.toml", "l4lb.log", "l4lb-udp-refused.log")
				s.dropUDP("this l4lb does not serve UDP: " + moved.Replace(err.Error()))
				h.logf("%s: %s; starting it without its UDP routes", name, s.udpDropped)
			}
			return startL4lb(h, s, bin, env, logKeys)
		},
	}
}

// startL4lb writes s's config, has l4lb check it when it has UDP routes,
// and starts l4lb on it.
func startL4lb(h *harness, s *system, bin string, env []string, logKeys func(s *system) string) (*child, error) {
	cfg := s.file("l4lb.toml")
	extra := ""
	if logKeys != nil {
		extra = logKeys(s)
	}
	text := l4lbConfigWith(s.routes, h.threads, extra, s.spec.l4lbKeys)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return nil, err
	}
	if s.hasUDP() {
		// A refusal names the key; a failed start would only say "exited".
		if out, err := exec.Command(bin, "check", "-config", cfg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("l4lb check: %v: %s", err, firstLine(string(out)))
		}
	}
	return h.startAndWait(s, spawnSpec{
		name: s.spec.name, path: bin, args: []string{"-config", cfg}, env: h.goEnv(env),
		cred: h.cred, logPath: s.file("l4lb.log"),
	})
}

// l4lbBuild builds cmd/l4lb once per run, shared by all l4lb variants.
type l4lbBuild struct {
	once sync.Once
	path string
	err  error
}

func (h *harness) l4lbBinary() (string, error) {
	h.l4lb.once.Do(func() { h.l4lb.path, h.l4lb.err = buildL4lb(h.dir) })
	return h.l4lb.path, h.l4lb.err
}

func buildL4lb(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		return "", fmt.Errorf("l4lb: no Go module here (run from the repository root)")
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	if _, err := os.Stat(filepath.Join(root, "cmd", "l4lb")); err != nil {
		return "", fmt.Errorf("l4lb: cmd/l4lb is not in the tree yet")
	}
	// Not dir/l4lb: that is the l4lb system's own run directory.
	bin := filepath.Join(dir, "l4lb.bin")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/l4lb")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("l4lb: build failed: %s", firstLine(string(out)))
	}
	return bin, nil
}
