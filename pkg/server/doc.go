// Package server is l4lb's server: it wires the data path together and
// builds what it serves from a configuration. It makes one event loop per CPU (pkg/reactor), each with its TCP relay
// (pkg/relay) and its UDP sessions (pkg/udpsession), binds the listeners
// and hands each loop its socket of every one, applies reloads, enforces
// the global connection cap (with an upgrade's old process's connections,
// oldprocess.go), hands the listening sockets over on an
// upgrade, and drains on shutdown: stop accepting, give open relays a
// deadline, then close what is left. It also builds the pools, frontends
// and listener policies of a configuration (build.go), works out the fd
// budget (budget.go) and what a reload changes (reloadplan.go,
// reloaddiff.go).
package server
