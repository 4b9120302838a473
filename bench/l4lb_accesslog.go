package main

import (
	"fmt"
	"math"
)

// sysL4lbLog is l4lb with its access log on: the conn scenario's rows of
// l4lb and l4lb-log are the access log's cost (issue 12).
const sysL4lbLog = "l4lb-log"

// l4lbAccessLogSystem is l4lb writing a JSON access line per connection to
// access.log in its run directory (the harness's temporary directory, on
// disk). Opt-in: run it with -systems l4lb,l4lb-log (and -scenario conn);
// the file grows by about 250 bytes a connection.
func l4lbAccessLogSystem() systemSpec {
	s := l4lbVariant(sysL4lbLog, nil, ` and [log] access = "json" to access.log in its run directory`, accessLogKeys)
	s.optIn = true
	return s
}

// accessLogKeys are l4lb-log's [log] keys.
func accessLogKeys(s *system) string {
	return fmt.Sprintf("access = \"json\"\naccess_file = %q\n", s.file("access.log"))
}

// defaultSystemNames are the systems a run without -systems runs: all but
// the opt-in ones.
func defaultSystemNames() []string {
	var out []string
	for _, s := range systemCatalog() {
		if !s.optIn {
			out = append(out, s.name)
		}
	}
	return out
}

func optInSystemNames() []string {
	var out []string
	for _, s := range systemCatalog() {
		if s.optIn {
			out = append(out, s.name)
		}
	}
	return out
}

// accessLogNote compares l4lb with and without its access log by their
// medians in one scenario: connection rate and CPU per connection.
func accessLogNote(sr *ScenarioResult) (string, bool) {
	var on, off bool
	for _, r := range sr.Rows {
		on = on || (r.System == sysL4lbLog && r.NA == "")
		off = off || (r.System == "l4lb" && r.NA == "")
	}
	if !on || !off {
		return "", false
	}
	rateOn, rateOff := sr.summary(sysL4lbLog, "conn_per_s").Median, sr.summary("l4lb", "conn_per_s").Median
	cpuOn, cpuOff := sr.summary(sysL4lbLog, "cpu_us_per_conn").Median, sr.summary("l4lb", "cpu_us_per_conn").Median
	if math.IsNaN(rateOn) || math.IsNaN(rateOff) {
		return "", false
	}
	note := fmt.Sprintf("access log cost (%s: l4lb with a JSON access line per connection to a file; medians): conn_per_s %s on vs %s off (%.2fx)",
		sysL4lbLog, formatNum(rateOn), formatNum(rateOff), ratio(rateOn, rateOff))
	if !math.IsNaN(cpuOn) && !math.IsNaN(cpuOff) {
		note += fmt.Sprintf("; cpu_us_per_conn %s on vs %s off (%+.1f µs, %+.0f%%)",
			formatNum(cpuOn), formatNum(cpuOff), cpuOn-cpuOff, 100*(ratio(cpuOn, cpuOff)-1))
	}
	return note, true
}
