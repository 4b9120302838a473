package discovery

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// result is how a lookup ended: the result label of
// l4lb_discovery_lookups_total.
type result int

const (
	resultOK       result = iota // records: a set of at least one backend
	resultEmpty                  // the name exists, no records of the wanted types (or no SRV target resolved)
	resultNXDomain               // the name does not exist
	resultError                  // a query failed: unreachable, SERVFAIL, REFUSED, a malformed answer
	resultTimeout                // a query no resolver answered in time
	numResults
)

var resultNames = [numResults]string{"ok", "empty", "nxdomain", "error", "timeout"}

func (r result) String() string { return resultNames[r] }

// answered: the resolvers answered, with records or without.
func (r result) answered() bool { return r <= resultNXDomain }

// noTTL is the TTL of an answer that carried none (no records, no SOA).
const noTTL = math.MaxUint32

// outcome is one lookup: every query it made.
type outcome struct {
	result   result
	backends []Backend // normalized; only for resultOK
	ttl      uint32    // the lowest TTL of what was used; noTTL if none
	err      error     // for resultError and resultTimeout
}

// failed is the outcome of a failed query.
func failed(err error) outcome {
	if errors.Is(err, errTimeout) {
		return outcome{result: resultTimeout, ttl: noTTL, err: err}
	}
	return outcome{result: resultError, ttl: noTTL, err: err}
}

// lookup resolves the plan once. A query that fails fails the lookup,
// even when others answered: a set built from half the answers would
// drop backends that still exist.
func (w *Watcher) lookup(ctx context.Context) outcome {
	if w.plan.srv {
		return w.lookupSRV(ctx)
	}
	target := strings.TrimSuffix(w.plan.name, ".")
	addrs, o := w.addresses(ctx, w.plan.name)
	if o.result != resultOK {
		return o
	}
	bs := make([]Backend, len(addrs))
	for i, a := range addrs {
		bs[i] = Backend{Addr: netip.AddrPortFrom(a, w.plan.port), Weight: 1, Target: target}
	}
	o.backends = normalize(bs)
	return o
}

// addresses asks for name's A and AAAA records, as the family wants.
// The outcome is resultOK with addrs, or why there are none.
func (w *Watcher) addresses(ctx context.Context, name string) (addrs []netip.Addr, o outcome) {
	o = outcome{result: resultEmpty, ttl: noTTL}
	var types []uint16
	if w.plan.family.v4 {
		types = append(types, dns.TypeA)
	}
	if w.plan.family.v6 {
		types = append(types, dns.TypeAAAA)
	}
	nx := false
	recordTTL, negativeTTL := uint32(noTTL), uint32(noTTL)
	for _, qtype := range types {
		in, err := w.res.query(ctx, name, qtype)
		if err != nil {
			return nil, failed(err)
		}
		if len(in.Answer) > 0 {
			recordTTL = min(recordTTL, answerTTL(in))
		} else {
			negativeTTL = min(negativeTTL, answerTTL(in))
		}
		nx = nx || in.Rcode == dns.RcodeNameError
		for _, rr := range in.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				if qtype == dns.TypeA {
					if a, ok := netip.AddrFromSlice(rr.A.To4()); ok {
						addrs = append(addrs, a)
					}
				}
			case *dns.AAAA:
				if qtype == dns.TypeAAAA {
					if a, ok := netip.AddrFromSlice(rr.AAAA.To16()); ok {
						addrs = append(addrs, a)
					}
				}
			}
		}
	}
	// The records a set is built from say when to look again; a type
	// without any (a name with A records only) does not make the
	// refresh follow its negative TTL.
	o.ttl = negativeTTL
	switch {
	case len(addrs) > 0:
		o.result, o.ttl = resultOK, recordTTL
	case nx:
		o.result = resultNXDomain
	}
	return addrs, o
}

// answerTTL is the lowest TTL of in's answer records (the CNAMEs on the
// way included) or, with none, its negative-caching TTL: the SOA's in the
// authority section, capped by the SOA's minimum field (RFC 2308).
func answerTTL(in *dns.Msg) uint32 {
	ttl := uint32(noTTL)
	for _, rr := range in.Answer {
		ttl = min(ttl, rr.Header().Ttl)
	}
	if len(in.Answer) > 0 {
		return ttl
	}
	for _, rr := range in.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			ttl = min(ttl, soa.Hdr.Ttl, soa.Minttl)
		}
	}
	return ttl
}

// lookupSRV asks for the SRV records, then for the addresses of their
// targets, priority by priority from the lowest value: the first
// priority with a target that resolves makes the set (the others are for
// when it has none; backup roles are not this package's).
func (w *Watcher) lookupSRV(ctx context.Context) outcome {
	in, err := w.res.query(ctx, w.plan.name, dns.TypeSRV)
	if err != nil {
		return failed(err)
	}
	o := outcome{result: resultEmpty, ttl: answerTTL(in)}
	if in.Rcode == dns.RcodeNameError {
		o.result = resultNXDomain
		return o
	}
	var recs []*dns.SRV
	for _, rr := range in.Answer {
		// "." as the target: the service is decidedly not available
		// there (RFC 2782).
		if srv, ok := rr.(*dns.SRV); ok && srv.Target != "." {
			recs = append(recs, srv)
		}
	}
	slices.SortStableFunc(recs, func(a, b *dns.SRV) int { return int(a.Priority) - int(b.Priority) })
	resolved := map[string][]netip.Addr{} // by lower-case target
	negativeTTL := uint32(noTTL)          // of the targets without addresses
	for start := 0; start < len(recs); {
		end := start + 1
		for end < len(recs) && recs[end].Priority == recs[start].Priority {
			end++
		}
		group := recs[start:end]
		start = end
		var largest uint16
		for _, rec := range group {
			largest = max(largest, rec.Weight)
		}
		var bs []Backend
		for _, rec := range group {
			key := strings.ToLower(rec.Target)
			addrs, seen := resolved[key]
			if !seen {
				var t outcome
				addrs, t = w.addresses(ctx, rec.Target)
				if !t.result.answered() {
					return t
				}
				if t.result == resultOK {
					o.ttl = min(o.ttl, t.ttl)
				} else {
					negativeTTL = min(negativeTTL, t.ttl)
				}
				resolved[key] = addrs
			}
			for _, a := range addrs {
				bs = append(bs, Backend{
					Addr: netip.AddrPortFrom(a, rec.Port), Weight: srvWeight(rec.Weight, largest),
					Priority: rec.Priority, Target: strings.TrimSuffix(rec.Target, "."),
				})
			}
		}
		if len(bs) > 0 {
			o.result, o.backends = resultOK, normalize(bs)
			return o
		}
	}
	o.ttl = min(o.ttl, negativeTTL) // look again when a target may have one
	return o
}
