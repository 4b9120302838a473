// Package arch holds the test that keeps the package dependency direction
// of DESIGN.md: cmd -> orchestration -> leaf packages, and the dependency
// fences (toml only in cmd and pkg/config, Prometheus only in cmd and
// pkg/admin).
package arch
