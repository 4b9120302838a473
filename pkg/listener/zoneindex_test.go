package listener

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A numeric zone names an interface by index: the config and the pre-bind
// check (package net) accept "[::1%1]:P", so the bind must too.
func TestNumericZoneIsAnInterfaceIndex(t *testing.T) {
	testnet.CheckLeaks(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no lo: %v", err)
	}
	idx := strconv.Itoa(lo.Index)
	for _, zone := range []string{"lo", idx} {
		_, sa, err := sockaddrOf(netip.MustParseAddrPort("[fe80::1%" + zone + "]:80"))
		if err != nil {
			t.Fatalf("zone %q: %v", zone, err)
		}
		if got := sa.(*unix.SockaddrInet6).ZoneId; got != uint32(lo.Index) {
			t.Fatalf("zone %q: ZoneId %d, want %d", zone, got, lo.Index)
		}
	}
	if _, _, err := sockaddrOf(netip.MustParseAddrPort("[fe80::1%no-such-if0]:80")); err == nil {
		t.Fatal("an unknown interface name was accepted")
	}

	if s, err := Bind("v6", "[::1]:0", 0, 1); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		s.Close()
	}
	s, err := Bind("z", "[::1%"+idx+"]:0", 0, 2)
	if err != nil {
		t.Fatalf("bind with a numeric zone: %v", err)
	}
	s.Close()
	u, err := BindUDP("z", "[::1%"+idx+"]:0", 2)
	if err != nil {
		t.Fatalf("UDP bind with a numeric zone: %v", err)
	}
	u.Close()
}
