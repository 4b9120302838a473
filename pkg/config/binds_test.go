package config

import (
	"net/netip"
	"testing"
)

// TestBindsThatCollideAreRefused covers the binds run cannot open together
// (pkg/listener fails the second with "address already in use"); the cmd
// tests bind them for real.
func TestBindsThatCollideAreRefused(t *testing.T) {
	b := `"127.0.0.1:9001"`
	tests := []problem{
		{"IPv4 wildcard then specific", listeners([]string{`"0.0.0.0:8080"`, `"127.0.0.1:8080" #!`}, b), "listener[1].bind",
			`bind "127.0.0.1:8080" collides with listener[0] "0.0.0.0:8080" (line 1): 0.0.0.0:8080 already takes port 8080 on every local IPv4 address`},
		{"IPv4 specific then wildcard", listeners([]string{`"127.0.0.1:8080"`, `"0.0.0.0:8080" #!`}, b), "listener[1].bind",
			"0.0.0.0:8080 already takes port 8080 on every local IPv4 address"},
		{"IPv6 wildcard then specific", listeners([]string{`"[::]:8080"`, `"[::1]:8080" #!`}, b), "listener[1].bind",
			"[::]:8080 already takes port 8080 on every local IPv6 address"},
		{"IPv6 specific then wildcard", listeners([]string{`"[fd00::1]:8080"`, `"[::]:8080" #!`}, b), "listener[1].bind",
			"[::]:8080 already takes port 8080 on every local IPv6 address"},
		{"IPv4-mapped wildcard is the IPv4 wildcard", listeners([]string{`"10.1.1.1:8080"`, `"[::ffff:0.0.0.0]:8080" #!`}, b), "listener[1].bind",
			"0.0.0.0:8080 already takes port 8080 on every local IPv4 address"},
		{"identical wildcards", listeners([]string{`"0.0.0.0:8080"`, `"0.0.0.0:8080" #!`}, b), "listener[1].bind",
			`duplicate bind "0.0.0.0:8080": listener[0] (line 1) already listens on 0.0.0.0:8080`},
		{"third listener collides with the first only", listeners([]string{`"0.0.0.0:8080"`, `"0.0.0.0:8081"`, `"127.0.0.9:8080" #!`}, b), "listener[2].bind",
			`collides with listener[0] "0.0.0.0:8080" (line 1)`},
		{"admin on a wildcard listener's port", listeners([]string{`"0.0.0.0:9000"`}, b) + "[admin]\nlisten = \"127.0.0.1:9000\" #!\n", "admin.listen",
			`"127.0.0.1:9000" collides with listener[0] "0.0.0.0:9000" (line 1): 0.0.0.0:9000 already takes port 9000`},
		{"admin wildcard over a listener", listeners([]string{`"127.0.0.1:9000"`}, b) + "[admin]\nlisten = \"0.0.0.0:9000\" #!\n", "admin.listen",
			"0.0.0.0:9000 already takes port 9000 on every local IPv4 address"},
		{"listener over the admin default", listeners([]string{`"0.0.0.0:9090" #!`}, b), "listener[0].bind",
			`bind "0.0.0.0:9090" collides with the admin endpoint's default address "127.0.0.1:9090": 0.0.0.0:9090 already takes port 9090`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
}

// TestBindsThatCoexistAreAccepted covers binds that do not collide: other
// ports, other specific addresses, and the two families' wildcards, since
// "[::]" is bound IPv6-only.
func TestBindsThatCoexistAreAccepted(t *testing.T) {
	b := `"127.0.0.1:9001"`
	tests := []struct {
		name  string
		binds []string
		extra string
	}{
		{"both wildcards", []string{`"0.0.0.0:8080"`, `"[::]:8080"`}, ""},
		{"IPv6 wildcard and an IPv4 address", []string{`"[::]:8080"`, `"127.0.0.1:8080"`}, ""},
		{"IPv4 wildcard and an IPv6 address", []string{`"0.0.0.0:8080"`, `"[::1]:8080"`}, ""},
		{"two specific addresses", []string{`"127.0.0.1:8080"`, `"127.0.0.2:8080"`}, ""},
		{"wildcard and another port", []string{`"0.0.0.0:8080"`, `"127.0.0.1:8081"`}, ""},
		{"admin on another family's wildcard", []string{`"[::]:9000"`}, "[admin]\nlisten = \"0.0.0.0:9000\"\n"},
		{"admin off", []string{`"0.0.0.0:9090"`}, "[admin]\nlisten = \"\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustParse(t, listeners(tt.binds, b)+tt.extra) })
	}
}

func TestBindsCollide(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		a, b string
		want bool
	}{
		{"0.0.0.0:1", "127.0.0.1:1", true},
		{"127.0.0.1:1", "127.0.0.1:1", true},
		{"[::]:1", "[fe80::1%lo]:1", true},
		{"[::]:1", "0.0.0.0:1", false},
		{"[::]:1", "127.0.0.1:1", false},
		{"0.0.0.0:1", "0.0.0.0:2", false},
		{"[fe80::1%lo]:1", "[fe80::1%eth0]:1", false},
	}
	for _, tt := range tests {
		if got := bindsCollide(ap(tt.a), ap(tt.b)); got != tt.want {
			t.Errorf("bindsCollide(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := bindsCollide(ap(tt.b), ap(tt.a)); got != tt.want {
			t.Errorf("bindsCollide(%s, %s) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}
