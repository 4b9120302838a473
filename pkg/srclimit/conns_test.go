package srclimit

import (
	"net/netip"
	"testing"
)

func TestConnectionCap(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 3})
	a := v4(1)
	for i := range 3 {
		expect(t, l, a, int64(i), Admit)
	}
	expect(t, l, a, 3, OverConns)
	expect(t, l, a, 4, OverConns)
	if n := check(t, l); n != 3 {
		t.Fatalf("counts = %d after 3 admitted and 2 refused, want 3", n)
	}
	l.Release(a)
	expect(t, l, a, 5, Admit)
	expect(t, l, a, 6, OverConns)
	for range 3 {
		l.Release(a)
	}
	if n := l.Sources(); n != 0 {
		t.Fatalf("Sources() = %d with no connection open, want 0", n)
	}
	for i := range 3 {
		expect(t, l, a, int64(7+i), Admit)
	}
	expect(t, l, a, 10, OverConns)
}

func TestSourcesIndependent(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 2, Rate: 1, Burst: 2})
	a, b, c := v4(1), v4(2), v6(1)
	for _, x := range []netip.Addr{a, b, c} {
		expect(t, l, x, 0, Admit)
		expect(t, l, x, 0, Admit)
	}
	expect(t, l, a, 0, OverConns)
	l.Release(a)
	expect(t, l, a, 0, OverRate) // a's bucket is empty, b's and c's state is theirs
	l.Release(b)
	expect(t, l, b, s1, Admit)
	expect(t, l, c, s1, OverConns)
	if n := l.Sources(); n != 3 {
		t.Fatalf("Sources() = %d, want 3", n)
	}
}

func TestIPv4MappedIsIPv4(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 2})
	a := netip.MustParseAddr("192.0.2.7")
	m := netip.MustParseAddr("::ffff:192.0.2.7")
	z := netip.MustParseAddr("fe80::1%eth0")
	expect(t, l, a, 0, Admit)
	expect(t, l, m, 0, Admit)
	expect(t, l, a, 0, OverConns)
	expect(t, l, m, 0, OverConns)
	if n := l.Sources(); n != 1 {
		t.Fatalf("Sources() = %d for one address in two forms, want 1", n)
	}
	l.Release(m)
	l.Release(a)
	expect(t, l, z, 0, Admit)
	expect(t, l, z.WithZone(""), 0, Admit) // zones are dropped
	expect(t, l, z.WithZone("eth1"), 0, OverConns)
	l.Release(z)
	l.Release(z.WithZone("eth2"))
	if n := l.Sources(); n != 0 {
		t.Fatalf("Sources() = %d, want 0", n)
	}
}

func TestReleaseUnknownIsHarmless(t *testing.T) {
	l := mustNew(t, Config{MaxConns: 1})
	l.Release(v4(9)) // never admitted
	expect(t, l, v4(9), 0, Admit)
	l.Release(v4(9))
	l.Release(v4(9)) // once too often
	expect(t, l, v4(9), 0, Admit)
	expect(t, l, v4(9), 0, OverConns)
	l.Release(netip.Addr{})
	if n := check(t, l); n != 1 {
		t.Fatalf("counts = %d, want 1", n)
	}
}

func TestNilLimiter(t *testing.T) {
	var l *Limiter
	for range 10 {
		if v := l.Admit(v4(1), 0); v != Admit {
			t.Fatalf("nil Limiter: %v", v)
		}
	}
	l.Release(v4(1))
	if l.Sources() != 0 || l.Now() != 0 {
		t.Fatal("nil Limiter holds something")
	}
	for _, cfg := range []Config{{}, {MaxConns: -1, Rate: -1, Burst: 5}} {
		if New(cfg) != nil {
			t.Errorf("New(%+v) limits something", cfg)
		}
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Admit: "ok", OverConns: "source_connections", OverRate: "source_rate", 9: "unknown"} {
		if v.String() != want {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), want)
		}
	}
}
