package relay

import (
	"net/netip"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

func TestPolicyForNothingToCheck(t *testing.T) {
	if p := PolicyFor(config.DefaultListener(), nil); p != nil {
		t.Fatalf("a listener with no policy key got %+v, want nil", p)
	}
}

func TestPolicyForKeepsTheLimiterOfUnchangedLimits(t *testing.T) {
	l := config.DefaultListener()
	l.MaxConnsPerSource = 1
	first := PolicyFor(l, nil)
	if first == nil || first.Sources == nil {
		t.Fatalf("a listener with a per-source cap got %+v", first)
	}
	if got := first.admit(netip.MustParseAddr("192.0.2.1")); got != CloseCompleted {
		t.Fatalf("first connection: %v", got)
	}
	// A reload with the same limits: the open connection still counts.
	again := PolicyFor(l, first)
	if again.Sources != first.Sources {
		t.Fatal("a reload with unchanged limits made a new Limiter: open connections would stop counting")
	}
	if got := again.admit(netip.MustParseAddr("192.0.2.1")); got != CloseSourceConnections {
		t.Fatalf("second connection of a source at its cap after a reload: %v, want %v", got, CloseSourceConnections)
	}
	// Another prefix length is another way of counting: a new Limiter.
	l.SourceIPv4Prefix = 24
	wider := PolicyFor(l, again)
	if wider.Sources == again.Sources {
		t.Fatal("a reload that changed source_ipv4_prefix kept the old Limiter")
	}
	if got := wider.admit(netip.MustParseAddr("192.0.2.1")); got != CloseCompleted {
		t.Fatalf("first connection under the new limits: %v", got)
	}
	if got := wider.admit(netip.MustParseAddr("192.0.2.77")); got != CloseSourceConnections {
		t.Fatalf("another address of the same /24 at source_ipv4_prefix 24: %v, want %v", got, CloseSourceConnections)
	}
	if got := wider.admit(netip.MustParseAddr("2001:db8:0:1::1")); got != CloseCompleted {
		t.Fatalf("an IPv6 client: %v", got)
	}
	if got := wider.admit(netip.MustParseAddr("2001:db8:0:1::2")); got != CloseSourceConnections {
		t.Fatalf("another address of the same IPv6 /64: %v, want %v", got, CloseSourceConnections)
	}
}
