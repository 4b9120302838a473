package srclimit

import (
	"math"
	"time"
)

// Config is the admission policy of one listener.
type Config struct {
	// MaxConns is the number of concurrent connections per source address;
	// 0 (or less) means no cap.
	MaxConns int
	// Rate is the number of new connections per second per source address;
	// 0 (or less, NaN or +Inf) means no rate limit.
	Rate float64
	// Burst is the bucket size; 0 (or less) means max(1, ceil(Rate)).
	Burst int
	// IPv4Prefix and IPv6Prefix are how many leading bits of a client
	// address name its source: addresses that share them share one cap
	// and one bucket. 0 (or less) means 32 for IPv4, each address alone,
	// and 64 for IPv6: a host picks any address of its /64 (privacy
	// addresses rotate on their own), so a limit per IPv6 address would
	// not hold it. Values past the family's length are that length.
	IPv4Prefix, IPv6Prefix int
	// Epoch is time 0 of the Limiter's clock (Limiter.Now), best a reading
	// of time.Now so that the clock is monotonic; the zero value means the
	// time of New.
	Epoch time.Time
}

const (
	maxInterval = int64(1) << 53 // ~104 days per token: slower rates are this one
	maxTau      = int64(1) << 60 // ~36 years of refill: bigger buckets are this one
)

// Default source prefixes (Config.IPv4Prefix, IPv6Prefix).
const (
	DefaultIPv4Prefix = 32
	DefaultIPv6Prefix = 64
)

// params are the limits derived from a Config.
type params struct {
	maxConns int32 // 0: no cap
	interval int64 // ns per token; 0: no rate limit
	tau      int64 // ns an empty bucket takes to fill: Burst·interval
	v4bits   int   // leading bits that name an IPv4 source, 1..32
	v6bits   int   // and an IPv6 one, 1..128
}

func (c Config) params() params {
	p := params{
		v4bits: prefixBits(c.IPv4Prefix, DefaultIPv4Prefix, 32),
		v6bits: prefixBits(c.IPv6Prefix, DefaultIPv6Prefix, 128),
	}
	if c.MaxConns > 0 {
		p.maxConns = int32(min(c.MaxConns, math.MaxInt32))
	}
	if c.Rate > 0 && !math.IsInf(c.Rate, 1) { // NaN fails c.Rate > 0
		burst := c.Burst
		if burst <= 0 {
			burst = int(max(1, math.Ceil(min(c.Rate, 1e9))))
		}
		// Clamp in float: int64 of a float past its range is not
		// saturated (it is MinInt64 on amd64), which made a tiny rate
		// one token a nanosecond.
		p.interval = maxInterval
		if iv := math.Round(1e9 / c.Rate); iv < float64(maxInterval) {
			p.interval = max(1, int64(iv))
		}
		if int64(burst) > maxTau/p.interval {
			p.tau = maxTau
		} else {
			p.tau = int64(burst) * p.interval
		}
	}
	return p
}

func prefixBits(bits, def, length int) int {
	if bits <= 0 {
		return def
	}
	return min(bits, length)
}
