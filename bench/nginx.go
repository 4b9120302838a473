package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// nginxStreamModule is where Debian's libnginx-mod-stream puts the module.
const nginxStreamModule = "/usr/lib/nginx/modules/ngx_stream_module.so"

// nginxConfig renders a stream-only nginx. Listeners use reuseport so each
// worker has its own accept queue: without it one worker tends to take a
// whole burst of streams (../shared/bench-method.md §7.3). The failover upstream uses
// nginx's passive detection, max_fails=3 fail_timeout=5s. proxy_half_close
// passes the client's FIN on (nginx >= 1.21.4), as the bulk sink needs.
// UDP routes listen with "udp reuseport", and proxy_timeout bounds a
// session whose reply was lost or that went idle; see nginxResponses.
func nginxConfig(routes []route, workers int, limit uint64, dir, modulePath string) string {
	var b strings.Builder
	if modulePath != "" {
		fmt.Fprintf(&b, "load_module %s;\n", modulePath)
	}
	fmt.Fprintf(&b, "worker_processes %d;\nworker_rlimit_nofile %d;\ndaemon off;\n", workers, limit)
	fmt.Fprintf(&b, "pid %s/nginx.pid;\nerror_log %s/nginx.err warn;\n\n", dir, dir)
	fmt.Fprintf(&b, "events { worker_connections %d; }\n\nstream {\n", nginxWorkerConnections(limit))
	for _, r := range routes {
		if err := checkLoopback(r.listen); err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "    upstream %s {\n", r.name)
		for _, be := range r.backends {
			fmt.Fprintf(&b, "        server %s", be)
			if r.name == routeFailover {
				b.WriteString(" max_fails=3 fail_timeout=5s")
			}
			b.WriteString(";\n")
		}
		b.WriteString("    }\n")
		if len(r.sni) > 0 {
			writeNginxSNI(&b, r)
			continue
		}
		if r.udp == udpNone {
			fmt.Fprintf(&b, "    server { listen %s reuseport; proxy_pass %s; proxy_half_close on; }\n", r.listen, r.name)
			continue
		}
		fmt.Fprintf(&b, "    server { listen %s udp reuseport; proxy_pass %s;%s proxy_timeout %s; }\n",
			r.listen, r.name, nginxResponses(r.udp), udpSessionTimeout)
	}
	b.WriteString("}\n")
	return b.String()
}

// writeNginxSNI renders the sni listener's routed upstreams (its own, the
// fallback, is written already) and a server that reads the ClientHello
// with ssl_preread, for as long as the other proxies wait for it, and
// proxies to the upstream the name maps to.
func writeNginxSNI(b *strings.Builder, r route) {
	for _, p := range r.sni {
		fmt.Fprintf(b, "    upstream %s {\n        server %s;\n    }\n", p.pool, p.backend)
	}
	variable := "$" + r.name + "_upstream"
	fmt.Fprintf(b, "    map $ssl_preread_server_name %s {\n        hostnames;\n", variable)
	for _, p := range r.sni {
		fmt.Fprintf(b, "        %s %s;\n", p.host, p.pool)
	}
	fmt.Fprintf(b, "        default %s;\n    }\n", r.name)
	fmt.Fprintf(b, "    server { listen %s reuseport; ssl_preread on; preread_timeout %s; proxy_pass %s; proxy_half_close on; }\n",
		r.listen, sniInspectTimeout, variable)
}

// nginxResponses is the proxy_responses directive of a UDP route:
// request/response 1 (the session ends at the reply, as l4lb's
// responses = 1 does); one-way none (unlimited: a session per client until
// proxy_timeout, as l4lb's one-way sessions); the no-reply route 0 ("no
// response expected": nginx ends the session once the client's queued
// datagrams are sent, so a stream takes a new upstream socket per burst).
func nginxResponses(m udpMode) string {
	switch m {
	case udpRRMode:
		return " proxy_responses 1;"
	case udpNoReplyMode:
		return " proxy_responses 0;"
	}
	return ""
}

func nginxSystem() systemSpec {
	return systemSpec{
		name: "nginx", kind: KindPeer, fdsPerConn: 2, udpNoReply: true,
		about: "nginx stream, worker_processes = proxy threads, listen ... reuseport",
		prepare: func(h *harness, s *system) error {
			if _, err := exec.LookPath("nginx"); err != nil {
				return fmt.Errorf("nginx not installed (%s)", installHint)
			}
			out, _ := exec.Command("nginx", "-V").CombinedOutput()
			if strings.Contains(string(out), "--with-stream=dynamic") {
				if _, err := os.Stat(nginxStreamModule); err != nil {
					return fmt.Errorf("nginx stream module missing (%s)", installHint)
				}
			} else if !strings.Contains(string(out), "--with-stream") {
				return fmt.Errorf("nginx built without stream (%s)", installHint)
			}
			return nil
		},
		start: func(h *harness, s *system) (*child, error) {
			module := ""
			if _, err := os.Stat(nginxStreamModule); err == nil {
				module = nginxStreamModule
			}
			cfg := s.file("nginx.conf")
			if err := os.WriteFile(cfg, []byte(nginxConfig(s.routes, h.threads, h.limit, s.dir, module)), 0o644); err != nil {
				return nil, err
			}
			return h.startAndWait(s, spawnSpec{
				name: s.spec.name, path: "nginx",
				args: []string{"-p", s.dir, "-c", cfg, "-e", s.file("nginx.err")},
				cred: h.cred, logPath: s.file("nginx.log"),
			})
		},
	}
}
