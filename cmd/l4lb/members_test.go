package main

import (
	"net/netip"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/discovery"
)

func TestDiscoveredBackendsTakeTheBlocksSettings(t *testing.T) {
	set := discovery.Set{Backends: []discovery.Backend{
		{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Weight: 7},
		{Addr: netip.MustParseAddrPort("[::1]:80"), Weight: 2},
	}}
	d := config.DefaultDiscovery()
	d.DNS, d.Weight, d.MaxConnections, d.Backup, d.Line = "web.test:80", 5, 9, true, 12
	got := discoveredBackends(d, set)
	if len(got) != 2 {
		t.Fatalf("%d backends", len(got))
	}
	for _, b := range got {
		if b.Weight != 5 || b.MaxConnections != 9 || !b.Backup || b.Line != 12 {
			t.Fatalf("dns backend %+v: want the block's weight 5, cap 9, backup, line 12", b)
		}
	}
	if got[1].Addr != "[::1]:80" {
		t.Fatalf("address %q, want [::1]:80", got[1].Addr)
	}
	d.DNS, d.SRV = "", "_web._tcp.test"
	if got := discoveredBackends(d, set); got[0].Weight != 7 || got[1].Weight != 2 {
		t.Fatalf("srv backends %+v: want the records' weights", got)
	}
}

func TestSameSpecIgnoresTheLineOnly(t *testing.T) {
	a := config.DefaultDiscovery()
	a.DNS, a.Resolvers, a.Line = "web.test:80", []string{"127.0.0.1:53"}, 3
	b := a
	b.Resolvers = []string{"127.0.0.1:53"}
	b.Line = 9
	if !sameSpec(a, b) {
		t.Fatal("a block moved to another line counted as changed")
	}
	b.Resolvers = []string{"127.0.0.2:53"}
	if sameSpec(a, b) {
		t.Fatal("another resolver counted as the same block")
	}
}
