package main

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

// reportProse is the report's text around the tables: an "intro" block
// and one block per scenario, named as the scenario (report.md.tmpl).
//
//go:embed report.md.tmpl
var reportProseSource string

var reportProse = template.Must(template.New("report").Parse(reportProseSource))

// renderMarkdown prints the page docs/performance.md is: the intro, the
// run's lines, then per scenario a table of medians [min–max], a table of
// ratios to direct and to the best peer in the same run, and what the
// scenario's figures mean.
func renderMarkdown(rep report) string {
	var b strings.Builder
	writeProse(&b, "intro")
	b.WriteString("\n")
	for _, m := range rep.meta {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	for _, sr := range rep.results {
		writeScenarioMD(&b, sr)
		writeProse(&b, sr.Scenario)
	}
	return b.String()
}

// writeProse writes the template block name, if there is one.
func writeProse(b *strings.Builder, name string) {
	if reportProse.Lookup(name) == nil {
		return
	}
	if err := reportProse.ExecuteTemplate(b, name, nil); err != nil {
		panic(err) // static text with no data: cannot fail once parsed
	}
}

func writeScenarioMD(b *strings.Builder, sr *ScenarioResult) {
	fmt.Fprintf(b, "\n## %s\n\nmedian [min–max] over rounds\n\n| system |", sr.Scenario)
	for _, m := range sr.Metrics {
		fmt.Fprintf(b, " %s |", metricHeader(m))
	}
	b.WriteString(" rounds | steal runs |\n|---|")
	b.WriteString(strings.Repeat("---|", len(sr.Metrics)+2))
	b.WriteString("\n")
	for _, r := range sr.Rows {
		fmt.Fprintf(b, "| %s |", r.System)
		if r.NA != "" {
			b.WriteString(strings.Repeat(" n/a |", len(sr.Metrics)) + " - | - |\n")
			continue
		}
		rounds := 0
		for _, m := range sr.Metrics {
			s := summarize(r.Samples[m.Name])
			rounds = max(rounds, s.Rounds)
			more := ""
			if r.LowerBound[m.Name] {
				more = "> "
			}
			fmt.Fprintf(b, " %s%s |", more, formatSummary(s))
		}
		steal := fmt.Sprint(r.StealRuns)
		if r.StealRuns > 0 {
			steal += " ⚠"
		}
		fmt.Fprintf(b, " %d/%d | %s |\n", rounds, r.Runs, steal)
	}
	writeRatiosMD(b, sr)
	for _, r := range sr.Rows {
		if r.NA != "" {
			fmt.Fprintf(b, "\n- %s: n/a: %s", r.System, r.NA)
		}
		for _, e := range uniq(r.Errors) {
			fmt.Fprintf(b, "\n- %s: %s", r.System, e)
		}
	}
	for _, n := range sr.Notes {
		fmt.Fprintf(b, "\n- %s", n)
	}
	b.WriteString("\n")
}

func writeRatiosMD(b *strings.Builder, sr *ScenarioResult) {
	var ms []MetricDef
	for _, m := range sr.Metrics {
		if !m.NoRatio {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return
	}
	b.WriteString("\nratio of medians: × direct / × best peer (best peer per metric in the last row)\n\n| system |")
	for _, m := range ms {
		fmt.Fprintf(b, " %s |", m.Name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(ms)) + "\n")
	for _, r := range sr.Rows {
		fmt.Fprintf(b, "| %s |", r.System)
		if r.NA != "" {
			b.WriteString(strings.Repeat(" n/a |", len(ms)) + "\n")
			continue
		}
		for _, m := range ms {
			fmt.Fprintf(b, " %s / %s |", formatRatio(sr.ratioToDirect(r.System, m.Name)), formatRatio(sr.ratioToBestPeer(r.System, m.Name)))
		}
		b.WriteString("\n")
	}
	b.WriteString("| *best peer* |")
	for _, m := range ms {
		name, _ := sr.bestPeer(m.Name)
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(b, " %s |", name)
	}
	b.WriteString("\n")
}

func metricHeader(m MetricDef) string {
	arrow := "↑"
	if m.Better == LowerBetter {
		arrow = "↓"
	}
	if m.Unit == "" {
		return m.Name + " " + arrow
	}
	return fmt.Sprintf("%s (%s) %s", m.Name, m.Unit, arrow)
}

func formatSummary(s Summary) string {
	if s.Rounds == 0 {
		return "-"
	}
	if s.Rounds == 1 || s.Min == s.Max {
		return formatNum(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", formatNum(s.Median), formatNum(s.Min), formatNum(s.Max))
}

func formatRatio(r float64) string {
	if r != r { // NaN
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
