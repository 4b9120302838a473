// Package promrules is the test of the Prometheus rules l4lb ships in
// dist/prometheus: promtool's checks and unit tests run over them (so the
// README's test command runs them), the unit tests shown able to fail, and
// every metric, label and label value the rules and their tests name
// checked against the metrics table of docs/contracts.md, the metrics l4lb
// exports. It has no code of its own beyond the tests.
package promrules
