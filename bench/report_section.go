package main

import (
	"fmt"
	"os"
	"strings"
)

// An ordinary run with -append writes no page: its scenarios become one
// section of an existing page (docs/performance.md), between markers
// named by the scenarios, replacing that section of an earlier run and
// leaving the rest of the page (the main run's tables, the longlived
// sections) as it was. A new section goes before the longlived ones.

// llSectionMarker begins every longlived section (renderLLSection).
const llSectionMarker = "\n<!-- begin longlived "

// runSectionKey names a run's section by its scenarios.
func runSectionKey(scenarios []string) string { return "run " + strings.Join(scenarios, ",") }

// renderRunSection is the run's report as a section: a heading, the
// run's own lines (it is a separate run: compare its rows only with each
// other), then each scenario's tables and prose as on the page.
func renderRunSection(key string, rep report) string {
	var b strings.Builder
	var names []string
	for _, sr := range rep.results {
		names = append(names, sr.Scenario)
	}
	fmt.Fprintf(&b, "\n<!-- begin %s -->\n\n## A run of its own: %s\n\n", key, strings.Join(names, ", "))
	fmt.Fprintf(&b, "Measured apart from the tables above (`go run ./bench -scenario %s -append FILE`):\n"+
		"compare these rows with each other, not with the other sections.\n\n", strings.Join(names, ","))
	for _, m := range rep.meta {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	for _, sr := range rep.results {
		writeScenarioMD(&b, sr)
		writeProse(&b, sr.Scenario)
	}
	fmt.Fprintf(&b, "\n<!-- end %s -->\n", key)
	return b.String()
}

func appendRunSection(path string, scenarios []string, rep report) error {
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	key := runSectionKey(scenarios)
	out := spliceSection(string(doc), key, renderRunSection(key, rep), llSectionMarker)
	return os.WriteFile(path, []byte(out), 0o644)
}

// spliceSection puts section, which begins with "\n<!-- begin KEY -->\n"
// and ends with "<!-- end KEY -->\n", into doc: in place of the same key's
// earlier section; else just before the first occurrence of before (when
// before is not "" and doc has it); else at the end.
func spliceSection(doc, key, section, before string) string {
	begin, end := "\n<!-- begin "+key+" -->\n", "<!-- end "+key+" -->\n"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i >= 0 && j > i {
		return doc[:i] + section + doc[j+len(end):]
	}
	if k := strings.Index(doc, before); before != "" && k >= 0 {
		return doc[:k] + section + doc[k:]
	}
	return strings.TrimRight(doc, "\n") + "\n" + section
}
