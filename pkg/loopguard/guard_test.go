package loopguard

import (
	"net/netip"
	"testing"
)

// A dial is recognised by both its ends while it is recorded, and only
// then; a dial to a port l4lb does not listen on, or to a host that is
// not this one, could never loop.
func TestGuardRecordsDialsByBothEnds(t *testing.T) {
	g := New()
	lis := netip.MustParseAddrPort("127.0.0.1:8080")
	k := Conn{Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: lis}
	if g.MayLoop(lis) {
		t.Fatal("a dial may loop before any listener port is known")
	}
	g.ListenOn(8080)
	if !g.MayLoop(lis) || g.MayLoop(netip.MustParseAddrPort("127.0.0.1:9090")) || g.MayLoop(netip.MustParseAddrPort("192.0.2.1:8080")) {
		t.Fatal("MayLoop: want only a local address on a listening port")
	}
	g.IsLocal = func(a netip.Addr) bool { return a == netip.MustParseAddr("192.0.2.1") }
	if !g.MayLoop(netip.MustParseAddrPort("192.0.2.1:8080")) {
		t.Fatal("an address IsLocal claims is not local")
	}
	if g.Active() || g.Has(k) {
		t.Fatal("an empty guard knows a dial")
	}
	g.Add(k)
	other := Conn{Local: netip.MustParseAddrPort("127.0.0.1:40000"), Remote: netip.MustParseAddrPort("127.0.0.1:8081")}
	if !g.Active() || !g.Has(k) || g.Has(other) {
		t.Fatal("a recorded dial is not recognised by its two ends alone")
	}
	g.Remove(k)
	if g.Active() || g.Has(k) {
		t.Fatal("a removed dial is still known")
	}
}
