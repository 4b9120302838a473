// Command bench is l4lb's benchmark harness: it starts its own backends,
// l4lb and its peers (HAProxy, nginx, a naive Go io.Copy proxy) side by side
// on 127.0.0.1, runs the idle, bulk, conn, ping, sni (TLS clients through
// SNI routing), redis, udp, syscalls and failover scenarios
// against each in alternating rounds, and reports medians, ratios and a chart.
// Two scenarios run alone, as root, in network namespaces of their own:
// chaos (l4lb under faults, chaos.go) and longlived (N long-lived
// connections through each system in turn, a reconnect storm and an
// upgrade, longlived.go). A third runs alone without root: fleet (N
// instances' fleet stores against one redis-server, bench/fleetsim).
//
// Run it as `go run ./bench` from the repository root; see bench/README.md.
// The same binary also plays the helper roles it starts as child processes
// (`-role backend`, `-role goproxy`, `-role llclient`, `-role llbackend`...).
package main
