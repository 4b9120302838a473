package main

import (
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

func TestDeriveBudget(t *testing.T) {
	tests := []struct {
		name                                string
		limit, configured, sockets, backend int
		admin                               int
		wantMax, wantPipes                  int
	}{
		// 20000 fds: 256 pipes (512 fds), 64 spare, 2 listen sockets,
		// 3 backends (6 fds for their probes), 65 admin connections:
		// (20000-649)/2.
		{"derived from the fd limit", 20000, 0, 2, 3, 65, 9675, 256},
		{"admin endpoint off", 20000, 0, 2, 3, 0, 9708, 256},
		{"small limit keeps fewer pipes", 1024, 0, 1, 1, 65, (1024 - (64 + 1 + 2 + 2*64 + 65)) / 2, 64},
		{"configured value is kept", 20000, 500, 2, 3, 65, 500, 256},
		{"tiny limit still allows one client", 100, 0, 4, 10, 65, 1, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := deriveBudget(tc.limit, tc.configured, tc.sockets, tc.backend, tc.admin)
			if b.MaxConnections != tc.wantMax || b.MaxPipes != tc.wantPipes {
				t.Fatalf("budget %+v, want max_connections %d, pipes %d", b, tc.wantMax, tc.wantPipes)
			}
			if tc.configured == 0 && tc.limit > 1000 && b.Reserved+2*b.MaxConnections > tc.limit {
				t.Fatalf("derived cap needs %d fds, over the limit %d", b.Reserved+2*b.MaxConnections, tc.limit)
			}
		})
	}
}

// Every admin connection allowed is an fd the data path's cap leaves
// alone: raising [admin] max_connections lowers the derived cap.
func TestAdminConnectionsAreReserved(t *testing.T) {
	def := config.DefaultAdmin()
	if got := adminConns(def); got != def.MaxConnections+1 {
		t.Fatalf("adminConns(default) = %d, want the cap %d plus the fd of a refusal in progress", got, def.MaxConnections)
	}
	if got := adminConns(config.Admin{Listen: "", MaxConnections: 64}); got != 0 {
		t.Fatalf("adminConns with the endpoint off = %d, want 0", got)
	}
	small := deriveBudget(4096, 0, 2, 3, adminConns(config.Admin{Listen: "127.0.0.1:9090", MaxConnections: 10}))
	large := deriveBudget(4096, 0, 2, 3, adminConns(config.Admin{Listen: "127.0.0.1:9090", MaxConnections: 210}))
	if small.Reserved+200 != large.Reserved || 2*(small.MaxConnections-large.MaxConnections) != 200 {
		t.Fatalf("200 more admin connections: reserve %d -> %d, max_connections %d -> %d; want the 200 fds moved out of the data path",
			small.Reserved, large.Reserved, small.MaxConnections, large.MaxConnections)
	}
}
