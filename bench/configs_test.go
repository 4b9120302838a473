package main

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func testRoutes() []route {
	return placeSystem(directSystem(), 2, 30000, false).routes
}

func mustContain(t *testing.T, what, text string, needles ...string) {
	t.Helper()
	for _, n := range needles {
		if !strings.Contains(text, n) {
			t.Errorf("%s config lacks %q:\n%s", what, n, text)
		}
	}
}

func TestHaproxyConfig(t *testing.T) {
	cfg := haproxyConfig(testRoutes(), 2, 20000)
	mustContain(t, "haproxy", cfg,
		"nbthread 2", "maxconn 9500", "maxpipes 250", "mode tcp",
		"option splice-request", "option splice-response",
		"bind 127.0.0.1:30520", "server s0 127.0.0.1:30000",
		"check inter 1s fall 3 rise 1 observe layer4 error-limit 3 on-error mark-down",
		"option redispatch",
	)
	if strings.Contains(cfg, "splice-auto") {
		t.Error("splice-auto never splices in tcp mode on 2.6; the forced options are wanted")
	}
	if n := strings.Count(cfg, "check inter"); n != failoverBackendCount {
		t.Errorf("health checks on %d servers, want only the %d failover backends", n, failoverBackendCount)
	}
}

func TestNginxConfig(t *testing.T) {
	cfg := nginxConfig(testRoutes(), 2, 20000, "/tmp/x", nginxStreamModule)
	mustContain(t, "nginx", cfg,
		"load_module /usr/lib/nginx/modules/ngx_stream_module.so;", "worker_processes 2;",
		"worker_rlimit_nofile 20000;", "daemon off;", "pid /tmp/x/nginx.pid;",
		"worker_connections 19500;", "stream {", "listen 127.0.0.1:30520 reuseport;",
		"proxy_half_close on;", "server 127.0.0.1:30120 max_fails=3 fail_timeout=5s;",
	)
	if strings.Count(cfg, "max_fails") != failoverBackendCount {
		t.Error("max_fails belongs on the failover upstream only")
	}
	if strings.Contains(nginxConfig(testRoutes(), 1, 20000, "/tmp/x", ""), "load_module") {
		t.Error("no module path: no load_module line")
	}
}

func TestL4lbConfig(t *testing.T) {
	cfg := l4lbConfig(testRoutes(), 2, "")
	var doc struct {
		Global struct {
			EventLoops int `toml:"event_loops"`
			PipeSize   int `toml:"pipe_size"`
		}
		Admin    struct{ Listen string }
		Log      struct{ Level string }
		Listener []struct{ Name, Bind, Protocol, Pool string }
		Pool     map[string]struct {
			Algorithm string
			Backend   []struct{ Addr string }
			Health    struct{ Enabled bool }
			Breaker   struct {
				Failures int
				Cooldown string
			}
		}
	}
	md, err := toml.Decode(cfg, &doc)
	if err != nil {
		t.Fatalf("generated TOML does not parse: %v\n%s", err, cfg)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Errorf("keys outside the expected shape: %v", und)
	}
	if doc.Global.EventLoops != 2 || doc.Admin.Listen != "" || doc.Log.Level != "warn" {
		t.Errorf("global/admin/log = %+v %+v %+v", doc.Global, doc.Admin, doc.Log)
	}
	if len(doc.Listener) != len(testRoutes()) {
		t.Fatalf("listeners = %d, want %d", len(doc.Listener), len(testRoutes()))
	}
	for _, l := range doc.Listener {
		if l.Protocol != "tcp" || l.Pool != l.Name || checkLoopback(l.Bind) != nil {
			t.Errorf("listener %+v", l)
		}
		p := doc.Pool[l.Pool]
		if p.Health.Enabled {
			t.Errorf("pool %s: health checks must be off", l.Pool)
		}
		if len(p.Backend) == 0 {
			t.Errorf("pool %s has no backend", l.Pool)
		}
	}
	fo := doc.Pool[routeFailover]
	if len(fo.Backend) != failoverBackendCount || fo.Breaker.Failures != 3 || fo.Breaker.Cooldown != "5s" {
		t.Errorf("failover pool = %+v", fo)
	}
}

func TestConfigsRefuseForeignAddresses(t *testing.T) {
	bad := []route{{name: "x", listen: "0.0.0.0:80", backends: []string{"127.0.0.1:81"}}}
	for name, render := range map[string]func(){
		"haproxy": func() { haproxyConfig(bad, 1, 20000) },
		"nginx":   func() { nginxConfig(bad, 1, 20000, "/tmp", "") },
		"l4lb":    func() { l4lbConfig(bad, 1, "") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("a non-loopback listener was rendered")
				}
			}()
			render()
		})
	}
}
