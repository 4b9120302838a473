package srclimit

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

const (
	ms = int64(time.Millisecond)
	s1 = int64(time.Second)
)

// v4 is the i-th IPv4 test address (10.0.0.0/8 and on).
func v4(i int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 0x0a000000+uint32(i))
	return netip.AddrFrom4(b)
}

// v6 is the i-th IPv6 test source (2001:db8::/32), each in a /64 of its
// own: the Limiter counts an IPv6 source by its /64 unless told otherwise.
func v6(i int) netip.Addr {
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8}
	binary.BigEndian.PutUint32(b[4:], uint32(i))
	b[15] = 1
	return netip.AddrFrom16(b)
}

func mustNew(t testing.TB, cfg Config) *Limiter {
	t.Helper()
	l := New(cfg)
	if l == nil {
		t.Fatalf("New(%+v) = nil", cfg)
	}
	return l
}

// admitN calls Admit n times at now and counts the verdicts.
func admitN(l *Limiter, a netip.Addr, now int64, n int) map[Verdict]int {
	got := map[Verdict]int{}
	for range n {
		got[l.Admit(a, now)]++
	}
	return got
}

// expect checks one Admit's verdict.
func expect(t *testing.T, l *Limiter, a netip.Addr, now int64, want Verdict) {
	t.Helper()
	if got := l.Admit(a, now); got != want {
		t.Fatalf("Admit(%v, %v) = %v, want %v", a, time.Duration(now), got, want)
	}
}

// check verifies every shard's structure and returns the total of the
// connection counts it holds.
func check(t testing.TB, l *Limiter) (conns int) {
	t.Helper()
	for si := range l.shards {
		s := &l.shards[si]
		s.mu.Lock()
		if len(s.idx) != len(s.ents) {
			t.Errorf("shard %d: %d index entries, %d entries", si, len(s.idx), len(s.ents))
		}
		if s.cursor < 0 || s.cursor > len(s.ents) {
			t.Errorf("shard %d: cursor %d of %d", si, s.cursor, len(s.ents))
		}
		for i, e := range s.ents {
			if j, ok := s.idx[e.key]; !ok || int(j) != i {
				t.Errorf("shard %d: entry %d indexed at %d (%v)", si, i, j, ok)
			}
			if l.shardOf(&e.key) != s {
				t.Errorf("shard %d holds a key of another shard", si)
			}
			if e.conns < 0 || (l.p.maxConns > 0 && e.conns > l.p.maxConns) || (l.p.maxConns == 0 && e.conns != 0) {
				t.Errorf("shard %d: entry %d has %d conns", si, i, e.conns)
			}
			conns += int(e.conns)
		}
		s.mu.Unlock()
	}
	return conns
}

// probePerShard returns one IPv6 test address for each shard of l.
func probePerShard(l *Limiter) []netip.Addr {
	var probes []netip.Addr
	seen := map[*shard]bool{}
	for i := 1 << 20; len(probes) < nShards; i++ {
		a := v6(i)
		k := l.key(a)
		if s := l.shardOf(&k); !seen[s] {
			seen[s] = true
			probes = append(probes, a)
		}
	}
	return probes
}
