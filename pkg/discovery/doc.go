// Package discovery resolves what a pool's [pool.NAME.discovery] block
// names (A and AAAA records of a name, or SRV records and their targets)
// and reports each new set of backends it finds. It keeps no pools and
// reads no configuration: a Watcher runs one goroutine of its own, never
// an event loop, and hands every changed set to its OnChange callback.
//
// The rules (the refresh at the records' TTL, failures keeping the last
// good set, the empty grace, the SRV priority and weight mapping, the
// metrics) are written down once, in docs/discovery.md.
package discovery
