package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
)

func TestRenderMarkdown(t *testing.T) {
	sr := sampleResult()
	sr.Metrics = append(sr.Metrics, MetricDef{Name: "failures", Better: LowerBetter, NoRatio: true})
	md := renderMarkdown(report{meta: []string{"2 CPUs"}, results: []*ScenarioResult{sr}})
	for _, want := range []string{
		"- 2 CPUs",
		"## bulk",
		"| system | gbps ↑ | cpu ↓ | failures ↓ | rounds | steal runs |",
		"| direct | 30.00 [20.00–40.00] | - | - | 3/3 | 0 |",
		"| nginx | 15.00 [14.00–16.00] | 0.65 [0.6–0.7] | - | 3/3 | 1 ⚠ |",
		"| l4lb | 0.67 / 1.33 | - / 0.56 |",
		"| *best peer* | nginx | haproxy |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| system | gbps | cpu | failures |") {
		t.Error("a NoRatio metric appears in the ratio table")
	}
}

func TestRenderJSON(t *testing.T) {
	sr := sampleResult()
	var recs []Record
	if err := json.Unmarshal(renderJSON([]*ScenarioResult{sr}), &recs); err != nil {
		t.Fatal(err)
	}
	// direct has no cpu figure: 4 gbps + 3 cpu records.
	if len(recs) != 7 {
		t.Fatalf("records = %d, want 7: %+v", len(recs), recs)
	}
	want := Record{Scenario: "bulk", System: "haproxy", Metric: "gbps", Value: 11, Min: 10, Max: 12, Rounds: 3}
	found := false
	for _, r := range recs {
		if r == want {
			found = true
		}
		if math.IsNaN(r.Value) {
			t.Errorf("NaN leaked into %+v", r)
		}
	}
	if !found {
		t.Errorf("no record %+v in %+v", want, recs)
	}
	raw := string(renderJSON(nil))
	if strings.TrimSpace(raw) != "[]" {
		t.Errorf("no results should be an empty array, got %q", raw)
	}
}

func TestRenderSVG(t *testing.T) {
	bulk := sampleResult()
	bulk.Metrics[0].Chart = true
	ping := &ScenarioResult{Scenario: "ping", Metrics: []MetricDef{{Name: "p50_us", Better: LowerBetter, Chart: true}}}
	ping.add("<direct & co>", KindDirect, map[string]float64{"p50_us": 15}, 0, nil)
	ping.add("l4lb", KindSubject, map[string]float64{}, 0, nil) // failed round: n/a bar
	svg := renderSVG([]*ScenarioResult{bulk, ping})

	dec := xml.NewDecoder(strings.NewReader(svg))
	panels, rects := map[string]bool{}, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not valid XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if se.Name.Local == "g" && a.Name.Local == "id" {
					panels[a.Value] = true
				}
			}
			if se.Name.Local == "rect" {
				rects++
			}
		}
	}
	if len(panels) != 2 || !panels["panel-bulk"] || !panels["panel-ping"] {
		t.Errorf("panels = %v, want one per scenario", panels)
	}
	// background + 2 panel frames + 4 bulk bars + 1 ping bar.
	if rects != 8 {
		t.Errorf("rects = %d, want 8", rects)
	}
	if !strings.Contains(svg, "&lt;direct &amp; co&gt;") {
		t.Error("system names are not escaped")
	}
}

// TestReportProseNamesScenarios keeps report.md.tmpl's blocks in step with
// the scenarios: a block named after no scenario would never be written.
func TestReportProseNamesScenarios(t *testing.T) {
	known := map[string]bool{"intro": true, "report": true}
	for _, n := range append(scenarioNames(), llProseBlocks...) {
		known[n] = true
	}
	for _, tmpl := range reportProse.Templates() {
		if !known[tmpl.Name()] {
			t.Errorf("report.md.tmpl defines %q, which is no scenario", tmpl.Name())
		}
	}
	md := renderMarkdown(report{meta: []string{"2 CPUs"}, results: []*ScenarioResult{sampleResult()}})
	if !strings.HasPrefix(md, "# l4lb performance\n") {
		t.Errorf("the page does not start with its title:\n%.200s", md)
	}
	if !strings.Contains(md, "## This run\n\n- 2 CPUs\n") {
		t.Errorf("the run's lines are not under their heading:\n%s", md)
	}
	if !strings.Contains(md, "Reading it: CPU per GB") {
		t.Errorf("the bulk scenario's prose is missing:\n%s", md)
	}
}

// TestCommittedReportHasTheTemplatesProse keeps docs/performance.md what
// the bench writes: its prose is the template's, so an edit to one
// without the other (or by hand to the page) fails here.
func TestCommittedReportHasTheTemplatesProse(t *testing.T) {
	page, err := os.ReadFile("../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	var intro strings.Builder
	writeProse(&intro, "intro")
	if !strings.HasPrefix(string(page), intro.String()) {
		t.Error("docs/performance.md does not start with report.md.tmpl's intro; rerun the bench or copy the intro over")
	}
	for _, name := range scenarioNames() {
		if !strings.Contains(string(page), "\n## "+name+"\n") {
			continue
		}
		var prose strings.Builder
		writeProse(&prose, name)
		if !strings.Contains(string(page), prose.String()) {
			t.Errorf("docs/performance.md, scenario %s: not report.md.tmpl's prose", name)
		}
	}
}
