// Command bench is l4lb's benchmark harness: it starts its own backends,
// l4lb and its peers (HAProxy, nginx, a naive Go io.Copy proxy) side by side
// on 127.0.0.1, runs the bulk, conn, ping, idle and failover scenarios
// against each in alternating rounds, and reports medians, ratios and a chart.
//
// Run it as `go run ./bench` from the repository root; see bench/README.md.
// The same binary also plays the helper roles it starts as child processes
// (`-role backend`, `-role goproxy`).
package main
