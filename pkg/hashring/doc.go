// Package hashring maps 64-bit keys to nodes with consistent hashing: a ring
// with virtual nodes (optionally with bounded loads) and a Maglev lookup
// table.
//
// Both structures are immutable once built and safe for concurrent use. They
// place nodes by the hash of each node's ID, never by its position in the
// input slice, so two instances built from the same nodes in any order map
// every key to the same node. Lookups return indices into the slice the
// structure was built from.
//
// Both expose Successors, the node's owner followed by the next distinct
// nodes in the structure's own order (clockwise along the ring, successive
// slots of the Maglev table). That order is a pure function of the key and
// the node set, so a client whose owner is unavailable always lands on the
// same fallback, and gets its owner back once the owner returns.
// SuccessorsIn walks the same order restricted to the nodes of a Mask,
// jumping over the others, so that a walk costs what it meets in the mask
// however many nodes are left out.
//
// The hash function is injected (xxhash when nil) so that tests can use one
// whose values can be worked out by hand.
package hashring
