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
package pick
