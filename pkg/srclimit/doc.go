// Package srclimit is per-source-address admission for one listener: a cap
// on the concurrent connections of each client address and a token bucket
// of new connections per second for each client address. One Limiter is
// shared by all event loops of the process; it is safe for concurrent use.
//
// # Using it
//
//	lim := srclimit.New(srclimit.Config{MaxConns: 64, Rate: 20, Burst: 40})
//	...
//	// on the loop, for each accepted connection (lim may be nil: no limits):
//	if v := lim.Admit(remote.Addr(), lim.Now()); v != srclimit.Admit {
//	        refused.WithLabelValues(v.String()).Inc() // "source_connections" or "source_rate"
//	        close(fd)
//	        return
//	}
//	...
//	lim.Release(remote.Addr()) // exactly once, when that connection closes
//
// Time is an int64 of nanoseconds since the Limiter's epoch (Config.Epoch,
// Limiter.Now). Callers may pass a clock of their own read once per
// wake-up, as long as it has that epoch; a shard never lets its time go
// back, so readings that race a little out of order across threads are
// taken at the latest time the shard has seen.
//
// # Decision
//
// Admit checks the concurrency cap first, then the bucket, in one critical
// section. A source at its cap gets OverConns and its bucket is not
// touched; a source with no token gets OverRate and its count is not
// raised. Only an admitted connection takes a token and counts against
// its source until Release.
//
// A source is the first Config.IPv4Prefix or IPv6Prefix bits of a client
// address: by default each IPv4 address, and each IPv6 /64, since one
// host may use any address of its /64. IPv4-mapped IPv6 addresses are the
// IPv4 address; IPv6 zones are ignored; the invalid netip.Addr counts as
// "::".
//
// The bucket is kept as a theoretical arrival time (GCRA): one token every
// T = 1/Rate seconds (rounded to the nanosecond), Burst tokens at most, so
// R = Burst·T is the time an empty bucket takes to fill. A bucket is full
// exactly when that time is not in the future.
//
// # Memory
//
// The Limiter has 64 shards, chosen by a keyed hash of the address, each a
// mutex, a dense slice of 32-byte entries and a map from address to slice
// index. An entry exists only while it carries information: its source has
// connections open (with a cap) or its bucket is not full, i.e. it was
// admitted within the last R. Dead entries are dropped lazily:
//
//   - Release drops the entry when its count reaches 0 and its bucket is
//     full (always, when there is no rate limit: then Sources() is exactly
//     the number of sources with connections open);
//   - with a rate limit, each Admit on a shard (admitted or not) first
//     examines the next K = 5 entries of that shard at a round-robin cursor
//     and drops the dead ones. Removals keep the shard's slice dense without
//     letting an entry skip a pass, so every entry is examined once a pass,
//     and a pass over n entries ends within ⌈n/(K−1)⌉ Admit calls on the
//     shard, each of which adds one entry at most.
//
// Bound: call a source alive while it has connections open or was
// admitted within the last R, and let L be the most sources alive at once
// in a shard. An entry held now was alive when the previous pass began or
// was touched by one of the Admit calls since, at most 2·⌈n/(K−1)⌉ of
// them; so a shard never holds more than (K−1)/(K−3)·(L+2) = 2·(L+2)
// entries, whatever the number of distinct sources seen. Under a steady
// flood of new sources at λ per second with C sources holding
// connections, L ≤ (λ·R + C)/64 or so and the Limiter holds about
// (K−1)/(K−2)·(λ·R + C) = 1.33·(λ·R + C): a million one-off sources at
// 10⁶/s with R = 1 ms never take more than about 1,230 entries (1,000
// alive), not a million
// (TestMemoryBound, TestMemoryBoundWaves). Without a rate limit an entry
// lives exactly as long as its source has connections open: at most C.
//
// An entry is 32 bytes in a slice plus a 20-byte map slot. The memory
// behind a shard is its high-water mark (Go maps do not shrink). Entries
// are swept by traffic: when Admit calls stop, dead entries stay, costing
// nothing more, until the next calls on their shards.
package srclimit
