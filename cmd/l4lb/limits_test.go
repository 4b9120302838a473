package main

import "testing"

func TestDeriveBudget(t *testing.T) {
	tests := []struct {
		name                                string
		limit, configured, sockets, backend int
		wantMax, wantPipes                  int
	}{
		// 20000 fds: 256 pipes (512 fds), 64 spare, 2 listen sockets,
		// 3 backends (6 fds for their probes): (20000-584)/2.
		{"derived from the fd limit", 20000, 0, 2, 3, 9708, 256},
		{"small limit keeps fewer pipes", 1024, 0, 1, 1, (1024 - (64 + 1 + 2 + 2*64)) / 2, 64},
		{"configured value is kept", 20000, 500, 2, 3, 500, 256},
		{"tiny limit still allows one client", 100, 0, 4, 10, 1, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := deriveBudget(tc.limit, tc.configured, tc.sockets, tc.backend)
			if b.MaxConnections != tc.wantMax || b.MaxPipes != tc.wantPipes {
				t.Fatalf("budget %+v, want max_connections %d, pipes %d", b, tc.wantMax, tc.wantPipes)
			}
			if tc.configured == 0 && tc.limit > 1000 && b.Reserved+2*b.MaxConnections > tc.limit {
				t.Fatalf("derived cap needs %d fds, over the limit %d", b.Reserved+2*b.MaxConnections, tc.limit)
			}
		})
	}
}
