// Package arch holds the tests that keep l4lb's package structure: every
// package of the module is classified (what it may import from the
// module), the classification is checked on the import graph `go list`
// reports, transitive dependencies included (as Tailscale's deptest does),
// third-party modules stay behind the packages fenced for them, and the
// package table of docs/architecture.md matches the graph.
package arch
