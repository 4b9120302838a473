package main

import "testing"

func TestIdleBudget(t *testing.T) {
	tests := []struct {
		name      string
		limit     uint64
		fds, capN int
		want      int
	}{
		{"2-fd proxy on 20000 is capped at 9000", 20000, 2, 9000, 9000},
		{"go reference uses 6 fds", 20000, 6, 9000, 3000},
		{"quick cap", 20000, 2, 2000, 2000},
		{"rounded down to 500", 8000, 2, 9000, 3500},
		{"tiny limit leaves nothing", 1024, 2, 9000, 0},
		{"limit below reserve", 500, 2, 9000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := idleBudget(tc.limit, tc.fds, tc.capN); got != tc.want {
				t.Fatalf("idleBudget(%d, %d, %d) = %d, want %d", tc.limit, tc.fds, tc.capN, got, tc.want)
			}
		})
	}
}

func TestPeerSizing(t *testing.T) {
	// ../shared/bench-method.md §3: maxconn 9500 with maxpipes 250 under 20000 fds.
	if got := haproxyMaxconn(20000, 250); got != 9500 {
		t.Errorf("haproxyMaxconn = %d, want 9500", got)
	}
	if got := nginxWorkerConnections(20000); got != 19500 {
		t.Errorf("nginxWorkerConnections = %d, want 19500", got)
	}
}
