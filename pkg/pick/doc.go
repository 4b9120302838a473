// Package pick chooses backends for client connections: for one client it
// returns an ordered list of candidates, the chosen backend first and then
// the fallbacks a dialer should try after a failed dial.
//
// One Picker serves a whole pool and is shared by every accept loop, so every
// Picker is safe for concurrent use. Pickers never rebuild anything when a
// backend goes down or comes back: they ask the pool's State at pick time and
// skip unusable backends, so a hashing picker gives a returning backend its
// keys back.
//
// The hashing algorithms (ip-hash, consistent-hash, maglev) place backends by
// their ID, never by their position in the list, so a fleet of instances
// configured with the same backends in any order sends each client to the
// same backend, and to the same fallbacks.
//
// No pick costs in proportion to the pool. least-conn keeps the backends in
// a heap by load per weight, weighted-round-robin keeps one heap per
// distinct effective weight (nginx's sequence, exactly), and
// consistent-hash with a balance factor keeps the totals its capacities
// need; they learn of changes from Notified.Changed when the pool calls it,
// else by polling a few backends per pick, and they always read the live
// state of what they return. The hashing pickers keep, the same way, a mask
// of the usable backends over their ring or table, so that a pool with
// nearly every backend down costs a walk no more than a healthy one. The
// others need no structure: round-robin, random and p2c touch a few
// backends.
package pick
