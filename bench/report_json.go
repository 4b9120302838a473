package main

import (
	"encoding/json"
	"math"
)

// Record is one figure of the JSON output.
type Record struct {
	Scenario  string  `json:"scenario"`
	System    string  `json:"system"`
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit,omitempty"`
	Value     float64 `json:"value"`
	Min       float64 `json:"min"`
	Max       float64 `json:"max"`
	Rounds    int     `json:"rounds"`
	StealRuns int     `json:"steal_runs"`
	// LowerBound: Value is the wait's bound, the event had not happened.
	LowerBound bool `json:"lower_bound,omitempty"`
}

// records flattens results; figures no round produced are left out (JSON
// has no NaN).
func records(results []*ScenarioResult) []Record {
	out := []Record{}
	for _, sr := range results {
		for _, r := range sr.Rows {
			for _, m := range sr.Metrics {
				s := summarize(r.Samples[m.Name])
				if s.Rounds == 0 || math.IsNaN(s.Median) {
					continue
				}
				out = append(out, Record{Scenario: sr.Scenario, System: r.System, Metric: m.Name, Unit: m.Unit,
					Value: s.Median, Min: s.Min, Max: s.Max, Rounds: s.Rounds, StealRuns: r.StealRuns, LowerBound: r.LowerBound[m.Name]})
			}
		}
	}
	return out
}

func renderJSON(results []*ScenarioResult) []byte {
	b, err := json.MarshalIndent(records(results), "", "  ")
	if err != nil {
		panic(err) // only finite floats and strings: cannot fail
	}
	return append(b, '\n')
}
