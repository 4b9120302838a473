package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run's section goes before the longlived sections, then replaces
// itself, and leaves everything else byte for byte.
func TestAppendRunSection(t *testing.T) {
	head := "# l4lb performance\n\n## conn\n\ntable\n"
	ll := "\n<!-- begin longlived N=10000 -->\n\nll text\n\n<!-- end longlived N=10000 -->\n"
	path := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(path, []byte(head+ll), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(meta string) string {
		sr := &ScenarioResult{Scenario: "sni", Metrics: []MetricDef{{Name: "p50_us", Unit: "µs", Better: LowerBetter}}}
		sr.add("l4lb", KindSubject, map[string]float64{"p50_us": 1}, 0, nil)
		if err := appendRunSection(path, []string{"sni"}, report{meta: []string{meta}, results: []*ScenarioResult{sr}}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := run("first run")
	if !strings.HasPrefix(first, head+"\n<!-- begin run sni -->\n") || !strings.HasSuffix(first, "<!-- end run sni -->\n"+ll) {
		t.Fatalf("section not between the page and the longlived sections:\n%s", first)
	}
	for _, want := range []string{"## A run of its own: sni", "- first run\n", "## sni\n", "| l4lb | 1 |"} {
		if !strings.Contains(first, want) {
			t.Errorf("section lacks %q:\n%s", want, first)
		}
	}
	second := run("second run")
	if strings.Contains(second, "first run") || strings.Count(second, "<!-- begin run sni -->") != 1 ||
		!strings.HasPrefix(second, head) || !strings.HasSuffix(second, ll) {
		t.Errorf("second run did not replace the first in place:\n%s", second)
	}
}
