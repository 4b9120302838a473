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
//     server-assisted client-side cache: the server tells each instance
//     when a key it has read changes (RESP3 client tracking).
//   - Store (store.go) is what the process uses. It answers from Redis while
//     Redis answers within the timeout, and from a local copy (a
//     breaker.MemoryStore kept by every Redis answer) while it does not:
//     the instance decides alone and says so. It turns invalidations into
//     breaker.Notifier calls, so a breaker re-reads a key the moment
//     another instance writes it.
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
// Beside the breaker state, the Store shares each pool's backends added
// through the admin API (members.go, membersredis.go): one versioned
// document per pool, which the caller encodes. Writes need Redis (apart,
// PutMembers fails with ErrStoreDown); reads answer the newest copy known;
// changes reach the other instances by invalidation, never by a poll; and
// a copy newer than Redis's (Redis lost its data) is written back.
//
// Nothing here runs on the data path: the event loops read breaker
// snapshots, and with breaker.Options.Async their transitions reach the
// Store from the breakers' own goroutines.
package fleet
