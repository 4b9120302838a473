package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

const installHint = "apt-get install haproxy nginx libnginx-mod-stream"

// haproxyNoUDP is why HAProxy has no row in the udp scenario.
const haproxyNoUDP = "HAProxy's community edition has no UDP proxying (UDP load balancing is in HAProxy Enterprise only)"

// haproxyMaxpipes bounds HAProxy's pipe pool (../shared/bench-method.md §3).
const haproxyMaxpipes = 250

// haproxyConfig renders mode tcp with forced splice (splice-auto never
// splices in tcp mode on 2.6), nbthread = proxy threads, and on the failover route
// HAProxy's own detection: active checks plus layer-4 observation.
func haproxyConfig(routes []route, nbthread int, limit uint64) string {
	maxconn := haproxyMaxconn(limit, haproxyMaxpipes)
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    nbthread %d\n    maxconn %d\n    maxpipes %d\n\n", nbthread, maxconn, haproxyMaxpipes)
	fmt.Fprintf(&b, "defaults\n    mode tcp\n    maxconn %d\n    timeout connect 5s\n    timeout client 10m\n    timeout server 10m\n", maxconn)
	b.WriteString("    option splice-request\n    option splice-response\n")
	for _, r := range routes {
		if err := checkLoopback(r.listen); err != nil {
			panic(err)
		}
		if r.udp != udpNone {
			continue // haproxyNoUDP: placeSystem gives it none
		}
		if len(r.sni) > 0 {
			writeHaproxySNI(&b, r)
			continue
		}
		fmt.Fprintf(&b, "\nlisten %s\n    bind %s\n", r.name, r.listen)
		if r.name == routeFailover {
			b.WriteString("    balance roundrobin\n    retries 2\n    option redispatch 1\n")
		}
		for i, be := range r.backends {
			fmt.Fprintf(&b, "    server s%d %s", i, be)
			if r.name == routeFailover {
				b.WriteString(" check inter 1s fall 3 rise 1 observe layer4 error-limit 3 on-error mark-down")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// writeHaproxySNI renders the sni listener as a frontend that waits up to
// the inspect delay for a whole ClientHello (req_ssl_hello_type 1 holds
// until the record is complete), picks a backend by req.ssl_sni, and
// sends the rest to the fallback backend.
func writeHaproxySNI(b *strings.Builder, r route) {
	fmt.Fprintf(b, "\nfrontend %s\n    bind %s\n    tcp-request inspect-delay %s\n", r.name, r.listen, sniInspectTimeout)
	b.WriteString("    tcp-request content accept if { req_ssl_hello_type 1 }\n")
	for _, p := range r.sni {
		fmt.Fprintf(b, "    use_backend %s if { req.ssl_sni -i %s }\n", p.pool, p.host)
	}
	fallback := r.name + "_fallback"
	fmt.Fprintf(b, "    default_backend %s\n", fallback)
	backend := func(name string, servers []string) {
		fmt.Fprintf(b, "\nbackend %s\n", name)
		for i, be := range servers {
			fmt.Fprintf(b, "    server s%d %s\n", i, be)
		}
	}
	for _, p := range r.sni {
		backend(p.pool, []string{p.backend})
	}
	backend(fallback, r.backends)
}

func haproxySystem() systemSpec {
	return systemSpec{
		name: "haproxy", kind: KindPeer, fdsPerConn: 2, noUDP: haproxyNoUDP,
		about: "HAProxy mode tcp, nbthread = proxy threads, option splice-request + splice-response",
		prepare: func(h *harness, s *system) error {
			if _, err := exec.LookPath("haproxy"); err != nil {
				return fmt.Errorf("haproxy not installed (%s)", installHint)
			}
			return nil
		},
		start: func(h *harness, s *system) (*child, error) {
			cfg := s.file("haproxy.cfg")
			if err := os.WriteFile(cfg, []byte(haproxyConfig(s.routes, h.threads, h.limit)), 0o644); err != nil {
				return nil, err
			}
			if out, err := exec.Command("haproxy", "-c", "-q", "-f", cfg).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("haproxy -c: %v: %s", err, firstLine(string(out)))
			}
			return h.startAndWait(s, spawnSpec{
				name: s.spec.name, path: "haproxy", args: []string{"-db", "-f", cfg},
				cred: h.cred, logPath: s.file("haproxy.log"),
			})
		},
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
