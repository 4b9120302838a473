package main

import (
	"math"
	"strings"
	"testing"
)

// redisCSV7 is real redis-benchmark 7.0.15 output on this machine:
// redis-benchmark -h 127.0.0.1 -p 29379 -c 50 -n 20000 -t get,set --csv -q
const redisCSV7 = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","151515.16","0.205","0.040","0.191","0.279","0.327","7.967"
"GET","21482.28","2.208","0.072","0.207","8.799","39.583","130.687"
`

func TestParseRedisCSV(t *testing.T) {
	res, err := parseRedisCSV([]byte(redisCSV7))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]redisResult{
		"SET": {rps: 151515.16, p50ms: 0.191, p99ms: 0.327},
		"GET": {rps: 21482.28, p50ms: 0.207, p99ms: 39.583},
	}
	if len(res) != len(want) {
		t.Fatalf("got %d tests, want %d: %+v", len(res), len(want), res)
	}
	for k, w := range want {
		if res[k] != w {
			t.Errorf("%s = %+v, want %+v", k, res[k], w)
		}
	}
}

func TestParseRedisCSVOldFormat(t *testing.T) {
	// redis < 7: no header, test and rps only.
	res, err := parseRedisCSV([]byte("\"SET\",\"86206.90\"\n\"GET\",\"89285.71\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res["GET"].rps != 89285.71 || res["SET"].rps != 86206.90 || !math.IsNaN(res["GET"].p50ms) {
		t.Errorf("got %+v", res)
	}
}

func TestParseRedisCSVNothing(t *testing.T) {
	for _, in := range []string{"", "\"test\",\"rps\"\n", "Could not connect to Redis\n"} {
		if res, err := parseRedisCSV([]byte(in)); err == nil {
			t.Errorf("%q: no error, got %+v", in, res)
		}
	}
}

// A scenario skipped for a missing tool has no rows, only its note; every
// renderer must cope.
func TestSkippedScenarioRenders(t *testing.T) {
	sr := &ScenarioResult{Scenario: "redis", Metrics: redisScenario{}.metrics(),
		Notes: []string{"skipped: redis-server not installed (" + redisHint + ")"}}
	md := renderMarkdown(report{results: []*ScenarioResult{sr}})
	if !strings.Contains(md, "## redis") || !strings.Contains(md, "skipped: redis-server not installed") {
		t.Errorf("markdown:\n%s", md)
	}
	_ = renderSVG([]*ScenarioResult{sr})
	_ = renderJSON([]*ScenarioResult{sr})
}
