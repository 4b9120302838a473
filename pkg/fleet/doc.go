// Package fleet is the breaker Store that a fleet of l4lb instances shares
// through Redis ([cluster] store = "redis"), so that what one instance
// learns about a broken backend stops the others' dials within one
// invalidation, without ever closing a breaker on stale evidence.
//
// Three layers, one file each:
//
//   - redisStore (redis.go, scripts.go, keys.go) is breaker.Store on Redis:
//     generations by INCR, every transition one Lua script (a
//     compare-and-set in one round trip), cooldowns as key TTLs read back
//     as time remaining, the probe lock as SET NX PX with an owner token,
//     manual disables under keys of their own. Reads go through rueidis'
//     server-assisted client-side cache: the server tells every instance
//     of every write under the key prefix (RESP3 broadcast tracking), so
//     a cached read is good until a write, and an idle fleet sends Redis
//     nothing but its health checks.
//   - Store (store.go) is what the process uses. It answers from Redis while
//     Redis answers within the timeout, and from a local copy (a
//     breaker.MemoryStore kept by every Redis answer) while it does not:
//     the instance decides alone and says so. It turns invalidations into
//     breaker.Notifier calls, so a breaker re-reads a key the moment
//     another instance writes it, and keeps an open breaker's answer
//     until its key changes or its cooldown runs out (openmemo.go).
//   - reconcile.go merges what happened while apart when Redis is back, by
//     one rule: open wins, and the generation of every key changed while
//     apart is raised above both sides, so no dial begun before the merge
//     can close a breaker after it. The same rule writes back a key Redis
//     answers behind the local copy (catchUp): one lost in a failover to
//     a replica it had not reached, which the fleet's marker cannot tell.
//
// Redis may be one server, a master set watched by Sentinel, or a Redis
// Cluster (every backend's keys in one slot, keys.go); the failover tests
// run real ones (sentinel_test.go, cluster_test.go).
//
// With a trip quorum (Config.TripQuorum, quorum.go) a trip is the
// instance's vote: one script adds it to the backend's vote set, timed by
// the server's clock and pruned to the failure window, and opens the
// breaker for the fleet once enough instances' votes are in it; below that
// the breaker opens on the voting instance alone (breaker.Quorum). Apart
// from Redis no vote is counted and nothing is merged.
//
// Beside the breaker state, the Store shares each pool's backends added
// through the admin API (members.go, membersredis.go): one versioned
// document per pool, which the caller encodes. Writes need Redis (apart,
// PutMembers fails with ErrStoreDown); reads answer the newest copy known;
// changes reach the other instances by invalidation, never by a poll; and
// a copy newer than Redis's (Redis lost its data) is written back.
//
// The operators' drains and runtime weights are shared too (drains.go,
// drainsredis.go): one versioned record of each per backend, beside its
// breaker keys, so their invalidations reach the key's watchers. A drain
// made while apart is kept and merged back (drained wins); an undrain or
// a weight needs Redis; a copy newer than Redis's is written back.
//
// Nothing here runs on the data path: the event loops read breaker
// snapshots, and with breaker.Options.Async their transitions reach the
// Store from the breakers' own goroutines.
package fleet
