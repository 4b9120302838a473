package server

import (
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

func TestDeriveBudget(t *testing.T) {
	tests := []struct {
		name                                string
		limit, configured, sockets, backend int
		admin, sessions                     int
		wantMax, wantPipes                  int
	}{
		// 20000 fds: 256 pipes (512 fds), 64 spare, 2 listen sockets,
		// 3 backends (6 fds for their probes), 65 admin connections:
		// (20000-649)/2.
		{"derived from the fd limit", 20000, 0, 2, 3, 65, 0, 9675, 256},
		{"admin endpoint off", 20000, 0, 2, 3, 0, 0, 9708, 256},
		{"small limit keeps fewer pipes", 1024, 0, 1, 1, 65, 0, (1024 - (64 + 1 + 2 + 2*64 + 65)) / 2, 64},
		{"configured value is kept", 20000, 500, 2, 3, 65, 0, 500, 256},
		{"tiny limit still allows one client", 100, 0, 4, 10, 65, 0, 1, 8},
		// UDP sessions hold one fd each: 16384 of them leave
		// (20000-649-16384)/2 for TCP clients.
		{"udp sessions are kept apart", 20000, 0, 2, 3, 65, 16384, 1483, 256},
		{"udp sessions beyond the limit leave one client", 20000, 0, 2, 3, 65, 40000, 1, 256},
		{"configured value is kept beside sessions", 20000, 500, 2, 3, 65, 16384, 500, 256},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := DeriveBudget(tc.limit, tc.configured, tc.sockets, tc.backend, tc.admin, tc.sessions)
			if b.MaxConnections != tc.wantMax || b.MaxPipes != tc.wantPipes {
				t.Fatalf("budget %+v, want max_connections %d, pipes %d", b, tc.wantMax, tc.wantPipes)
			}
			if tc.configured == 0 && tc.limit > 1000 && b.MaxConnections > 1 && b.Needed() > tc.limit {
				t.Fatalf("derived cap needs %d fds, over the limit %d", b.Reserved+2*b.MaxConnections, tc.limit)
			}
		})
	}
}

// Every admin connection allowed is an fd the data path's cap leaves
// alone: raising [admin] max_connections lowers the derived cap.
func TestAdminConnectionsAreReserved(t *testing.T) {
	def := config.DefaultAdmin()
	if got := AdminConns(def); got != def.MaxConnections+1 {
		t.Fatalf("AdminConns(default) = %d, want the cap %d plus the fd of a refusal in progress", got, def.MaxConnections)
	}
	if got := AdminConns(config.Admin{Listen: "", MaxConnections: 64}); got != 0 {
		t.Fatalf("AdminConns with the endpoint off = %d, want 0", got)
	}
	small := DeriveBudget(4096, 0, 2, 3, AdminConns(config.Admin{Listen: "127.0.0.1:9090", MaxConnections: 10}), 0)
	large := DeriveBudget(4096, 0, 2, 3, AdminConns(config.Admin{Listen: "127.0.0.1:9090", MaxConnections: 210}), 0)
	if small.Reserved+200 != large.Reserved || 2*(small.MaxConnections-large.MaxConnections) != 200 {
		t.Fatalf("200 more admin connections: reserve %d -> %d, max_connections %d -> %d; want the 200 fds moved out of the data path",
			small.Reserved, large.Reserved, small.MaxConnections, large.MaxConnections)
	}
}

// TestUDPSessionsAreReserved: every session a UDP listener may hold is an fd
// (its connected socket to the backend): the sum of max_sessions over the
// UDP listeners comes out of the derived cap, and a budget that cannot hold
// them says so.
func TestUDPSessionsAreReserved(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte(`[[listener]]
name = "web"
bind = "127.0.0.1:8080"
pool = "web"
[[listener]]
name = "dns"
bind = "127.0.0.1:5353"
protocol = "udp"
pool = "dns"
max_sessions = 1000
[[listener]]
name = "syslog"
bind = "127.0.0.1:514"
protocol = "udp"
pool = "dns"
[pool.web]
[[pool.web.backend]]
addr = "127.0.0.1:9001"
[pool.dns]
[[pool.dns.backend]]
addr = "127.0.0.1:9053"
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := UDPSessions(cfg), 1000+config.DefaultMaxSessions; got != want {
		t.Fatalf("UDPSessions = %d, want %d (the TCP listener holds none)", got, want)
	}
	without := DeriveBudget(40000, 0, 3, 2, 65, 0)
	with := DeriveBudget(40000, 0, 3, 2, 65, UDPSessions(cfg))
	if with.Reserved-without.Reserved != UDPSessions(cfg) || 2*(without.MaxConnections-with.MaxConnections) != UDPSessions(cfg) {
		t.Fatalf("sessions: reserve %d -> %d, max_connections %d -> %d; want the %d session fds moved out of the TCP cap",
			without.Reserved, with.Reserved, without.MaxConnections, with.MaxConnections, UDPSessions(cfg))
	}
	if msg := with.OverLimit(); msg != "" {
		t.Fatalf("a derived budget that fits warns: %s", msg)
	}

	tests := []struct {
		name                        string
		limit, configured, sessions int
		want                        string // in the warning; "" for none
	}{
		{"configured cap that fits", 40000, 10000, 17384, ""},
		{"configured cap beside sessions that do not fit", 20000, 10000, 17384, "max_connections and the UDP listeners' max_sessions need more file descriptors than the limit allows"},
		{"sessions alone over the limit", 10000, 0, 17384, "max_sessions need more file descriptors"},
		{"no sessions, configured cap too large", 20000, 10000, 0, "max_connections needs more file descriptors than the limit allows; raise LimitNOFILE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := DeriveBudget(tc.limit, tc.configured, 3, 2, 65, tc.sessions)
			msg := b.OverLimit()
			if (msg == "") != (tc.want == "") || !strings.Contains(msg, tc.want) {
				t.Fatalf("overLimit() = %q, want %q (budget %+v needs %d of %d fds)", msg, tc.want, b, b.Needed(), b.Limit)
			}
		})
	}
}
