package srclimit

import (
	"net/netip"
	"testing"
)

// A connection handed over by another process counts against its source
// past the cap (refusing it would cut it) and takes no token; the cap
// holds for new ones until enough of them are released.
func TestHoldCountsPastTheCapWithoutAToken(t *testing.T) {
	l := New(Config{MaxConns: 1, Rate: 1, Burst: 1})
	a := netip.MustParseAddr("192.0.2.1")
	l.Hold(a)
	l.Hold(a)
	if v := l.Admit(a, 0); v != OverConns {
		t.Fatalf("a source holding 2 of 1: %v, want %v", v, OverConns)
	}
	l.Release(a)
	if v := l.Admit(a, 0); v != OverConns {
		t.Fatalf("holding 1 of 1: %v, want %v", v, OverConns)
	}
	l.Release(a)
	if v := l.Admit(a, 0); v != Admit {
		t.Fatalf("holding none, the bucket untouched by the held ones: %v, want %v", v, Admit)
	}
	l.Release(a)
	var none *Limiter
	none.Hold(a) // a listener without limits
}
