package config

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// A pool's source addresses: every accepted form, in file order.
func TestSourceForms(t *testing.T) {
	cfg := mustParse(t, withPool(`source = ["192.0.2.10", "192.0.2.11:20000-40000", "[2001:db8::1]", "[2001:db8::2]:1024-2047", "::ffff:192.0.2.12"]`+"\n"))
	want := []Source{
		{Addr: netip.MustParseAddr("192.0.2.10")},
		{Addr: netip.MustParseAddr("192.0.2.11"), PortLo: 20000, PortHi: 40000},
		{Addr: netip.MustParseAddr("2001:db8::1")},
		{Addr: netip.MustParseAddr("2001:db8::2"), PortLo: 1024, PortHi: 2047},
		{Addr: netip.MustParseAddr("192.0.2.12")}, // IPv4-mapped: the IPv4 source it is
	}
	if got := cfg.Pools["web"].Sources; !reflect.DeepEqual(got, want) {
		t.Fatalf("sources %v, want %v", got, want)
	}
	if s := want[3].String(); s != "[2001:db8::2]:1024-2047" {
		t.Errorf("String() = %q", s)
	}
	if got := mustParse(t, validBase).Pools["web"].Sources; got != nil {
		t.Errorf("default sources %v, want none", got)
	}
}

func TestSourceErrors(t *testing.T) {
	key := "pool.web.source"
	tests := []problem{
		{"a name", withPool(`source = ["lb.example"] #!` + "\n"), key + "[0]", "not an IP address"},
		{"empty", withPool(`source = [""] #!` + "\n"), key + "[0]", "must not be empty"},
		{"wildcard", withPool(`source = ["0.0.0.0"] #!` + "\n"), key + "[0]", "cannot be a source"},
		{"multicast", withPool(`source = ["[ff02::1]"] #!` + "\n"), key + "[0]", "cannot be a source"},
		{"zone", withPool(`source = ["[fe80::1%eth0]"] #!` + "\n"), key + "[0]", "zone"},
		{"range reversed", withPool(`source = ["192.0.2.10:40000-20000"] #!` + "\n"), key + "[0]", "LO-HI"},
		{"port 0", withPool(`source = ["192.0.2.10:0-100"] #!` + "\n"), key + "[0]", "LO-HI"},
		{"one port", withPool(`source = ["192.0.2.10:8080"] #!` + "\n"), key + "[0]", "LO-HI"},
		{"unclosed bracket", withPool(`source = ["[2001:db8::1"] #!` + "\n"), key + "[0]", "without its ']'"},
		{"twice", withPool(`source = ["192.0.2.10", "192.0.2.10:1024-2047"] #!` + "\n"), key + "[1]", "appears again"},
		{"not a list", withPool(`source = "192.0.2.10" #!` + "\n"), key, ""},
		{"udp pool", withUDPPool(`source = ["192.0.2.10"] #!` + "\n"), "pool.dns.source", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantOneError(t, tc, parseErrors(t, tc.src))
		})
	}
}

// A source must be one of this host's addresses: check says so before run
// would fail every dial's bind(2).
func TestSourceMustBeLocal(t *testing.T) {
	cfg := mustParse(t, withPool(`source = ["127.0.0.2", "192.0.2.10"]`+"\n"))
	err := cfg.CheckHost(Host{Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/24")}})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != "pool.web.source[1]" {
		t.Fatalf("CheckHost: %v, want one error at pool.web.source[1]", err)
	}
	cfg = mustParse(t, withPool(`source = ["198.51.100.7"]`+"\n"))
	if err := cfg.CheckHost(Host{Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/24")}}); err != nil {
		t.Fatalf("a host address refused: %v", err)
	}
}
