package ipset

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// u128 is an IPv6 address as a number, hi the first 8 bytes.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// next is a+1; ok is false when a is the last address.
func (a u128) next() (u128, bool) {
	if a.lo != ^uint64(0) {
		return u128{a.hi, a.lo + 1}, true
	}
	if a.hi != ^uint64(0) {
		return u128{a.hi + 1, 0}, true
	}
	return a, false
}

// span is an inclusive range of addresses of one family (IPv4 ones in
// the low 32 bits of lo).
type span struct{ first, last u128 }

// Set is a set of IP networks; the zero Set is empty. A Set is not
// changed after New, so any number of goroutines may read it.
type Set struct {
	v4, v6 []span
}

// New returns the set of the networks in ps. Invalid prefixes are left
// out; an IPv4-mapped IPv6 network (::ffff:a.b.c.d/96 and longer) is the
// IPv4 network, as a mapped address is its IPv4 address.
func New(ps []netip.Prefix) Set {
	var v4, v6 []span
	for _, p := range ps {
		if !p.IsValid() {
			continue
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		first := number(p.Addr())
		hostBits := p.Addr().BitLen() - p.Bits()
		last := first
		switch {
		case hostBits >= 64:
			last.lo = ^uint64(0)
			last.hi |= ^uint64(0) >> (128 - hostBits)
		case hostBits > 0:
			last.lo |= ^uint64(0) >> (64 - hostBits)
		}
		if p.Addr().Is4() {
			v4 = append(v4, span{first, last})
		} else {
			v6 = append(v6, span{first, last})
		}
	}
	return Set{v4: merge(v4), v6: merge(v6)}
}

// number is a (unmapped, zone dropped) as a u128.
func number(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

// merge sorts spans and joins those that overlap or touch.
func merge(s []span) []span {
	if len(s) == 0 {
		return nil
	}
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.first.less(b.first):
			return -1
		case b.first.less(a.first):
			return 1
		}
		return 0
	})
	out := s[:1]
	for _, x := range s[1:] {
		cur := &out[len(out)-1]
		after, ok := cur.last.next()
		if !ok || !after.less(x.first) { // x starts inside cur or right after it
			if cur.last.less(x.last) {
				cur.last = x.last
			}
			continue
		}
		out = append(out, x)
	}
	return slices.Clip(out)
}

// Contains reports whether a is in one of the set's networks.
func (s Set) Contains(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	spans := s.v6
	if a.Is4() {
		spans = s.v4
	}
	n := number(a)
	// The last span that starts at or before a is the only one that can
	// hold it: spans are sorted and do not overlap.
	i, _ := slices.BinarySearchFunc(spans, n, func(x span, n u128) int {
		if n.less(x.first) {
			return 1
		}
		return -1
	})
	return i > 0 && !spans[i-1].last.less(n)
}

// Empty reports whether the set holds no address.
func (s Set) Empty() bool { return len(s.v4) == 0 && len(s.v6) == 0 }

// Ranges is how many ranges the networks merged into (for tests and
// sizing).
func (s Set) Ranges() int { return len(s.v4) + len(s.v6) }
