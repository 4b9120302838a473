// Package e2e holds l4lb's end-to-end tests: each runs the l4lb binary,
// built once by TestMain from ../cmd/l4lb (with the race detector when the
// tests have it), as an operator does: its command line, signals, the
// admin endpoint, systemd's notifications and socket activation, binary
// upgrades between real builds, fleets over a real Redis, backends found
// in a real DNS server's zone (dnsmasq), the shipped alerting rules on a
// real Prometheus scraping l4lb, and real clients, backends and front
// proxies (nginx, haproxy), some in network namespaces of their own. The package has no code of its own beyond the
// tests; go test ./... runs it with the rest.
package e2e
