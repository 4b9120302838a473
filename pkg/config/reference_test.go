package config

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const referencePath = "../../config.toml"

// TestReferenceConfigIsValid checks the shipped config.toml is a short
// example (at most 150 lines, pointing to the full reference), parses and
// is the demo: listener echo on 127.0.0.1:8080 (TCP) in front of three echo
// backends, listener udp-echo on 127.0.0.1:8081 (UDP) in front of three UDP
// echo backends with a send-expect check, round robin, admin on
// 127.0.0.1:9090; and that every key it writes holds its default.
func TestReferenceConfigIsValid(t *testing.T) {
	src, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n > 150 {
		t.Errorf("config.toml has %d lines, want at most 150: it is the example, %s the reference", n, ReferencePath)
	}
	if !bytes.Contains(src, []byte(ReferencePath)) {
		t.Errorf("config.toml does not point to %s for the keys it leaves out", ReferencePath)
	}
	cfg, err := Load(referencePath)
	if err != nil {
		t.Fatalf("config.toml does not pass: %v", err)
	}
	if len(cfg.Listeners) != 2 {
		t.Fatalf("listeners = %d, want 2", len(cfg.Listeners))
	}
	def := DefaultListener()
	wantTCP := def
	wantTCP.Name, wantTCP.Bind, wantTCP.Pool, wantTCP.Line = "echo", "127.0.0.1:8080", "echo", cfg.Listeners[0].Line
	if l := cfg.Listeners[0]; !reflect.DeepEqual(l, wantTCP) {
		t.Errorf("listener[0] = %+v, want echo on 127.0.0.1:8080 to pool echo, tcp, with the defaults %+v", l, wantTCP)
	}
	wantUDP := def
	wantUDP.Name, wantUDP.Bind, wantUDP.Protocol, wantUDP.Pool, wantUDP.Line = "udp-echo", "127.0.0.1:8081", ProtocolUDP, "udp-echo", cfg.Listeners[1].Line
	if l := cfg.Listeners[1]; !reflect.DeepEqual(l, wantUDP) {
		t.Errorf("listener[1] = %+v, want udp-echo on 127.0.0.1:8081 to pool udp-echo, udp, with the defaults %+v", l, wantUDP)
	}
	if cfg.Admin.Listen != "127.0.0.1:9090" {
		t.Errorf("admin listen = %q, want 127.0.0.1:9090", cfg.Admin.Listen)
	}
	// The reference writes defaults, so it must decode exactly as the
	// defaults do.
	if cfg.Global != DefaultGlobal() || cfg.Admin != DefaultAdmin() || cfg.Log != DefaultLog() || !reflect.DeepEqual(cfg.Cluster, DefaultCluster()) {
		t.Errorf("config.toml does not hold the defaults: %+v %+v %+v %+v", cfg.Global, cfg.Admin, cfg.Log, cfg.Cluster)
	}
	tests := []struct {
		pool, protocol, firstPort string
		health                    func(*Health)
	}{
		{"echo", ProtocolTCP, "9001", func(*Health) {}},
		{"udp-echo", ProtocolUDP, "9101", func(h *Health) {
			h.Type, h.Send, h.Expect = HealthSendExpect, []byte("ping"), []byte("ping")
		}},
	}
	for _, tt := range tests {
		p := cfg.Pools[tt.pool]
		if p == nil {
			t.Errorf("no pool %s", tt.pool)
			continue
		}
		var addrs []string
		for _, b := range p.Backends {
			addrs = append(addrs, b.Addr)
		}
		first, _ := strconv.Atoi(tt.firstPort)
		if want := fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d", first, first+1, first+2); strings.Join(addrs, " ") != want {
			t.Errorf("pool %s backends = %v, want %s", tt.pool, addrs, want)
		}
		want := DefaultPool(tt.pool)
		want.Protocol, want.Backends, want.Line = tt.protocol, p.Backends, p.Line
		tt.health(&want.Health)
		for _, b := range p.Backends {
			if b.Weight != DefaultBackend().Weight || b.ID != "" || b.MaxConnections != 0 {
				t.Errorf("pool %s backend %s: weight %d id %q max_connections %d, want the defaults", tt.pool, b.Addr, b.Weight, b.ID, b.MaxConnections)
			}
		}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("config.toml pool %s does not hold the defaults:\n got %+v\nwant %+v", tt.pool, *p, *want)
		}
	}
}
