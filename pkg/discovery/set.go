package discovery

import (
	"net/netip"
	"slices"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// Backend is one discovered backend.
type Backend struct {
	Addr netip.AddrPort
	// Weight is 1..config.MaxWeight: 1 from A/AAAA records, the SRV
	// record's weight mapped by srvWeights otherwise.
	Weight int
	// Priority is the SRV record's priority (0 from A/AAAA): every
	// backend of a set has the same one, the lowest that resolved.
	Priority uint16
	// Target is the name the address came from (the SRV target or the
	// DNS name, without the final dot), for logs.
	Target string
}

// Set is the backends one lookup found.
type Set struct {
	Backends []Backend // sorted by Addr, one per Addr
	At       time.Time // when the answer arrived (Options.Clock)
}

// normalize sorts bs by address and keeps one backend per address, the
// one with the highest weight (then the first target by name), so two
// records naming one address make one backend.
func normalize(bs []Backend) []Backend {
	slices.SortFunc(bs, func(a, b Backend) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		if a.Weight != b.Weight {
			return b.Weight - a.Weight
		}
		if a.Target < b.Target {
			return -1
		}
		if a.Target > b.Target {
			return 1
		}
		return 0
	})
	return slices.CompactFunc(bs, func(a, b Backend) bool { return a.Addr == b.Addr })
}

// srvWeight maps an SRV record's weight (0..65535) to an l4lb weight,
// given the largest weight among the records of its priority: weights
// up to config.MaxWeight are taken as they are, so the numbers an
// operator wrote are the ones the pools JSON shows; when the largest is
// above it, every weight is scaled by MaxWeight/largest (rounded), so the
// ratios hold to 1/MaxWeight. Weight 0, RFC 2782's "very small chance",
// becomes 1, the smallest share l4lb has.
func srvWeight(weight, largest uint16) int {
	w := int(weight)
	if int(largest) > config.MaxWeight {
		w = (w*config.MaxWeight + int(largest)/2) / int(largest)
	}
	return max(w, 1)
}
