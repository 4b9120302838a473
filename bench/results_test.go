package main

import (
	"math"
	"testing"
)

// sampleResult: direct, the subject and two peers, one higher-better and one
// lower-better metric.
func sampleResult() *ScenarioResult {
	sr := &ScenarioResult{Scenario: "bulk", Metrics: []MetricDef{
		{Name: "gbps", Better: HigherBetter},
		{Name: "cpu", Better: LowerBetter},
	}}
	for _, r := range []struct {
		sys       string
		kind      Kind
		gbps, cpu []float64
	}{
		{"direct", KindDirect, []float64{30, 40, 20}, nil},
		{"l4lb", KindSubject, []float64{20, 18, 22}, []float64{0.2, 0.3, 0.25}},
		{"haproxy", KindPeer, []float64{10, 12, 11}, []float64{0.5, 0.4, 0.45}},
		{"nginx", KindPeer, []float64{15, 16, 14}, []float64{0.6, 0.7, 0.65}},
	} {
		for i := range r.gbps {
			vals := map[string]float64{"gbps": r.gbps[i]}
			if r.cpu != nil {
				vals["cpu"] = r.cpu[i]
			}
			var steal uint64
			if r.sys == "nginx" && i == 0 {
				steal = 2
			}
			sr.add(r.sys, r.kind, vals, steal, nil)
		}
	}
	return sr
}

func TestRatios(t *testing.T) {
	sr := sampleResult()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got := sr.ratioToDirect("l4lb", "gbps"); !near(got, 20.0/30) {
		t.Errorf("l4lb gbps vs direct = %v, want %v", got, 20.0/30)
	}
	if name, v := sr.bestPeer("gbps"); name != "nginx" || v != 15 {
		t.Errorf("best gbps peer = %s %v, want nginx 15 (higher is better)", name, v)
	}
	if name, v := sr.bestPeer("cpu"); name != "haproxy" || v != 0.45 {
		t.Errorf("best cpu peer = %s %v, want haproxy 0.45 (lower is better)", name, v)
	}
	if got := sr.ratioToBestPeer("l4lb", "cpu"); !near(got, 0.25/0.45) {
		t.Errorf("l4lb cpu vs best peer = %v", got)
	}
	if got := sr.ratioToDirect("l4lb", "cpu"); !math.IsNaN(got) {
		t.Errorf("direct has no cpu figure: ratio should be NaN, got %v", got)
	}
	if r := sr.row("nginx", KindPeer); r.Runs != 3 || r.StealRuns != 1 {
		t.Errorf("nginx runs/steal = %d/%d, want 3/1", r.Runs, r.StealRuns)
	}
}
