package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	svgWidth    = 760.0
	svgLabelW   = 110.0 // system names
	svgValueW   = 90.0  // value text right of the bar
	svgBarH     = 14.0
	svgBarGap   = 4.0
	svgTitleH   = 26.0
	svgMetricH  = 20.0
	svgPanelGap = 18.0
)

// kindColour makes the subject stand out: direct grey, l4lb orange, peers blue.
var kindColour = map[Kind]string{KindDirect: "#9e9e9e", KindSubject: "#e8710a", KindPeer: "#1a73e8"}

// renderSVG draws one panel per scenario with, for each charted metric,
// one horizontal bar per system (median) and a whisker for min–max.
func renderSVG(results []*ScenarioResult) string {
	var body strings.Builder
	y := 10.0
	for _, sr := range results {
		y += svgPanel(&body, sr, y) + svgPanelGap
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, y, svgWidth, y)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	return b.String()
}

// svgPanel writes one scenario's panel at y and returns its height.
func svgPanel(b *strings.Builder, sr *ScenarioResult, y float64) float64 {
	var inner strings.Builder
	h := svgTitleH
	fmt.Fprintf(&inner, `<text x="4" y="16" font-size="14" font-weight="bold">%s</text>`+"\n", esc(sr.Scenario))
	for _, m := range sr.Metrics {
		if !m.Chart {
			continue
		}
		h += svgMetricBars(&inner, sr, m, h)
	}
	fmt.Fprintf(b, `<g class="panel" id="panel-%s" transform="translate(0,%.1f)">`+"\n", esc(sr.Scenario), y)
	fmt.Fprintf(b, `<rect x="1" y="0" width="%.0f" height="%.1f" fill="none" stroke="#ddd"/>`+"\n", svgWidth-2, h)
	b.WriteString(inner.String())
	b.WriteString("</g>\n")
	return h
}

func svgMetricBars(b *strings.Builder, sr *ScenarioResult, m MetricDef, y float64) float64 {
	hint := "higher is better"
	if m.Better == LowerBetter {
		hint = "lower is better"
	}
	label := m.Name
	if m.Unit != "" {
		label += " (" + m.Unit + ")"
	}
	fmt.Fprintf(b, `<text x="8" y="%.1f" fill="#333">%s, %s</text>`+"\n", y+14, esc(label), hint)
	y += svgMetricH
	scale := 0.0
	for _, r := range sr.Rows {
		s := summarize(r.Samples[m.Name])
		if s.Rounds > 0 {
			scale = math.Max(scale, math.Max(s.Max, s.Median))
		}
	}
	barMax := svgWidth - svgLabelW - svgValueW
	h := svgMetricH
	for _, r := range sr.Rows {
		s := summarize(r.Samples[m.Name])
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", svgLabelW-6, y+svgBarH-3, esc(r.System))
		if s.Rounds > 0 && scale > 0 {
			w := math.Max(0, s.Median/scale*barMax)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", svgLabelW, y, w, svgBarH, kindColour[r.Kind])
			lo, hi := math.Max(0, s.Min/scale*barMax), math.Max(0, s.Max/scale*barMax)
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000" stroke-width="1"/>`+"\n",
				svgLabelW+lo, svgLabelW+hi, y+svgBarH/2, y+svgBarH/2)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", svgLabelW+math.Max(w, hi)+4, y+svgBarH-3, esc(formatNum(s.Median)))
		} else {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#999">n/a</text>`+"\n", svgLabelW+4, y+svgBarH-3)
		}
		y += svgBarH + svgBarGap
		h += svgBarH + svgBarGap
	}
	return h + 4
}

func esc(s string) string {
	var buf bytes.Buffer
	_ = xml.EscapeText(&buf, []byte(s))
	return buf.String()
}
