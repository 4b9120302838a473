package main

import "math"

// Kind places a system in the comparison: the reference without a proxy,
// the subject under test, or an established peer.
type Kind int

const (
	KindDirect Kind = iota
	KindSubject
	KindPeer
)

// ScenarioResult collects every round of one scenario for all systems.
type ScenarioResult struct {
	Scenario string
	Metrics  []MetricDef
	Rows     []*SystemRow
	Notes    []string
}

// SystemRow is one system's samples in one scenario.
type SystemRow struct {
	System string
	Kind   Kind
	// Samples holds one value per round per metric (NaN: the round failed).
	Samples map[string][]float64
	// Runs counts rounds run; StealRuns those during which /proc/stat
	// showed steal ticks.
	Runs, StealRuns int
	Errors          []string
	// NA, when set, says why the system cannot run the scenario at all
	// (e.g. no UDP): the report shows n/a rather than leaving it out.
	NA string
	// LowerBound marks metrics whose value is a bound the event had not
	// reached when the wait ended (an old process still alive): "> X".
	LowerBound map[string]bool
}

// row returns the row of system, adding it in first-seen order.
func (sr *ScenarioResult) row(system string, kind Kind) *SystemRow {
	for _, r := range sr.Rows {
		if r.System == system {
			return r
		}
	}
	r := &SystemRow{System: system, Kind: kind, Samples: map[string][]float64{}}
	sr.Rows = append(sr.Rows, r)
	return r
}

// markNA records that system cannot run this scenario, and why.
func (sr *ScenarioResult) markNA(system string, kind Kind, why string) {
	sr.row(system, kind).NA = why
}

// add records one round of one system.
func (sr *ScenarioResult) add(system string, kind Kind, values map[string]float64, steal uint64, err error) {
	r := sr.row(system, kind)
	r.Runs++
	if steal > 0 {
		r.StealRuns++
	}
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	for _, m := range sr.Metrics {
		v, ok := values[m.Name]
		if !ok {
			v = math.NaN()
		}
		r.Samples[m.Name] = append(r.Samples[m.Name], v)
	}
}

func (sr *ScenarioResult) summary(system, metric string) Summary {
	for _, r := range sr.Rows {
		if r.System == system {
			return summarize(r.Samples[metric])
		}
	}
	return summarize(nil)
}

func (sr *ScenarioResult) metric(name string) MetricDef {
	for _, m := range sr.Metrics {
		if m.Name == name {
			return m
		}
	}
	return MetricDef{Name: name}
}

// ratioToDirect is the system's median over direct's median in this run.
func (sr *ScenarioResult) ratioToDirect(system, metric string) float64 {
	for _, r := range sr.Rows {
		if r.Kind == KindDirect {
			return ratio(sr.summary(system, metric).Median, sr.summary(r.System, metric).Median)
		}
	}
	return math.NaN()
}

// bestPeer returns the peer with the best median of metric in this run.
func (sr *ScenarioResult) bestPeer(metric string) (string, float64) {
	better := sr.metric(metric).Better
	name, best := "", math.NaN()
	for _, r := range sr.Rows {
		if r.Kind != KindPeer {
			continue
		}
		v := sr.summary(r.System, metric).Median
		if math.IsNaN(v) {
			continue
		}
		if math.IsNaN(best) || (better == HigherBetter && v > best) || (better == LowerBetter && v < best) {
			name, best = r.System, v
		}
	}
	return name, best
}

// ratioToBestPeer is the system's median over the best peer's median.
func (sr *ScenarioResult) ratioToBestPeer(system, metric string) float64 {
	_, best := sr.bestPeer(metric)
	return ratio(sr.summary(system, metric).Median, best)
}

func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

// subtractDirect fills metric into, round by round, with from minus
// direct's median of from (NaN in direct's own row): what a proxy adds
// over the clients' and backends' share, e.g. kernel memory.
func (sr *ScenarioResult) subtractDirect(from, into string) {
	base := math.NaN()
	for _, r := range sr.Rows {
		if r.Kind == KindDirect {
			base = summarize(r.Samples[from]).Median
		}
	}
	for _, r := range sr.Rows {
		vals := r.Samples[from]
		out := make([]float64, len(vals))
		for i, v := range vals {
			out[i] = v - base
			if r.Kind == KindDirect {
				out[i] = math.NaN()
			}
		}
		r.Samples[into] = out
	}
}

// addedOverDirect fills metric into with from minus direct's from in the
// same round (paired, unlike subtractDirect's median): what the proxy
// adds to a latency, with the drift between rounds taken out.
func (sr *ScenarioResult) addedOverDirect(from, into string) {
	var direct *SystemRow
	for _, r := range sr.Rows {
		if r.Kind == KindDirect {
			direct = r
		}
	}
	if direct == nil {
		return
	}
	base := direct.Samples[from]
	for _, r := range sr.Rows {
		vals := r.Samples[from]
		added := make([]float64, len(vals))
		for i := range vals {
			added[i] = math.NaN()
			if i < len(base) {
				added[i] = vals[i] - base[i]
			}
		}
		r.Samples[into] = added
	}
}
