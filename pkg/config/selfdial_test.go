package config

import "testing"

// TestBackendThatIsL4LBItselfIsRefused covers backends that would make
// l4lb connect to itself: the very bind, a loopback address under a
// wildcard bind, and a listener of another pool.
func TestBackendThatIsL4LBItselfIsRefused(t *testing.T) {
	const loop = "l4lb would connect to itself, in a loop, for every client"
	tests := []problem{
		{"backend is the listener's bind", listeners([]string{`"127.0.0.1:8080"`}, `"127.0.0.1:9001"`, `"127.0.0.1:8080" #!`), "pool.web.backend[1].addr",
			`backend "127.0.0.1:8080" is the address of listener[0] "l0" (bind "127.0.0.1:8080", line 1): ` + loop},
		{"IPv6 backend is the listener's bind", listeners([]string{`"[::1]:8080"`}, `"[0:0::1]:8080" #!`), "pool.web.backend[0].addr",
			`is the address of listener[0] "l0"`},
		{"loopback under an IPv4 wildcard", listeners([]string{`"0.0.0.0:8080"`}, `"127.0.0.1:8080" #!`), "pool.web.backend[0].addr",
			`backend "127.0.0.1:8080" is a loopback address, where listener[0] "l0" (bind "0.0.0.0:8080", line 1) accepts too: ` + loop},
		{"all of 127/8 is loopback", listeners([]string{`"0.0.0.0:8080"`}, `"127.3.2.1:8080" #!`), "pool.web.backend[0].addr",
			"is a loopback address"},
		{"loopback under an IPv6 wildcard", listeners([]string{`"[::]:8080"`}, `"[::1]:8080" #!`), "pool.web.backend[0].addr",
			"is a loopback address"},
		{"IPv4-mapped loopback", listeners([]string{`"0.0.0.0:8080"`}, `"[::ffff:127.0.0.1]:8080" #!`), "pool.web.backend[0].addr",
			"is a loopback address"},
		{"a listener of another pool", validBase + "[[listener]]\nname = \"api\"\nbind = \"127.0.0.1:7000\"\npool = \"api\"\n[pool.api]\n[[pool.api.backend]]\naddr = \"127.0.0.1:8080\" #!\n",
			"pool.api.backend[0].addr", `is the address of listener[0] "web" (bind "127.0.0.1:8080", line 1): ` + loop},
		{"a pool no listener uses", validBase + "[pool.spare]\n[[pool.spare.backend]]\naddr = \"127.0.0.1:8080\" #!\n",
			"pool.spare.backend[0].addr", loop},
		{"the admin endpoint", validBase + "[admin]\nlisten = \"127.0.0.1:9090\"\n[pool.x]\n[[pool.x.backend]]\naddr = \"127.0.0.1:9090\" #!\n",
			"pool.x.backend[0].addr", `backend "127.0.0.1:9090" is l4lb's own admin endpoint (admin.listen "127.0.0.1:9090", line 9): clients would reach the admin API through the pool`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
}

// TestBackendBesideL4LBIsAccepted covers backends near l4lb's addresses
// that are not l4lb: another port, another loopback address than a
// specific bind, the other family under a wildcard ("[::]" is IPv6 only),
// and a remote address (only CheckHost knows the host's own).
func TestBackendBesideL4LBIsAccepted(t *testing.T) {
	tests := []struct {
		name    string
		bind    string
		backend string
	}{
		{"another port", `"127.0.0.1:8080"`, `"127.0.0.1:8081"`},
		{"another loopback address", `"127.0.0.1:8080"`, `"127.0.0.2:8080"`},
		{"IPv4 under an IPv6 wildcard", `"[::]:8080"`, `"127.0.0.1:8080"`},
		{"IPv6 under an IPv4 wildcard", `"0.0.0.0:8080"`, `"[::1]:8080"`},
		{"remote under a wildcard", `"0.0.0.0:8080"`, `"10.0.0.1:8080"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustParse(t, listeners([]string{tt.bind}, tt.backend)) })
	}
}
