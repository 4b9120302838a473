package promrules

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// contractsDoc holds the table of the metrics l4lb exports: the contract
// the rules are written against.
const contractsDoc = "../../docs/contracts.md"

// exported is one metric of the contract: its labels, and the label
// values its meaning names (`ok`, `no_backend`, ...).
type exported struct {
	typ    string
	labels []string
	values map[string]bool
}

// enumerated are the labels whose values the contract lists; the others
// (pool, backend, listener, loop, hash, ...) take any value.
var enumerated = []string{"kind", "result", "reason", "direction", "state", "path", "op"}

// targetLabels are the labels a scrape adds to every series.
var targetLabels = []string{"job", "instance"}

// contractMetrics reads the metrics table of docs/contracts.md.
func contractMetrics(t *testing.T) map[string]exported {
	t.Helper()
	data, err := os.ReadFile(contractsDoc)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(l4lb_[a-z0-9_]+)` \\| (\\w+) \\|\\s*([a-z_, ]*?)\\s*\\| (.*) \\|$")
	value := regexp.MustCompile("`([a-z0-9_]+)`")
	metrics := map[string]exported{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		e := exported{typ: m[2], values: map[string]bool{}}
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				e.labels = append(e.labels, l)
			}
		}
		for _, v := range value.FindAllStringSubmatch(m[4], -1) {
			e.values[v[1]] = true
		}
		metrics[m[1]] = e
	}
	if len(metrics) < 40 {
		t.Fatalf("%s: only %d metrics read from its table", contractsDoc, len(metrics))
	}
	return metrics
}

var (
	// seriesRef is a metric name, not inside a recording rule's name
	// (level:metric:operations), with its label matchers if any.
	seriesRef = regexp.MustCompile(`(^|[^:\w])(l4lb_[a-z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// The rules and their tests name only metrics l4lb exports, with their
// labels and label values: a rule on a misspelt or made-up series would
// pass promtool and never fire. The tests' input series are checked too,
// so that what they feed the rules is what l4lb serves.
func TestRulesNameOnlyExportedMetrics(t *testing.T) {
	metrics := contractMetrics(t)
	files, _ := filepath.Glob(filepath.Join(rulesDir, "*.yml"))
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range seriesRef.FindAllStringSubmatch(string(data), -1) {
			seen++
			name, e, ok := lookup(metrics, m[2])
			if !ok {
				t.Errorf("%s: %s is not a metric l4lb exports (%s)", filepath.Base(f), m[2], contractsDoc)
				continue
			}
			for _, lm := range matcher.FindAllStringSubmatch(m[3], -1) {
				label, val := lm[1], lm[3]
				switch {
				case slices.Contains(targetLabels, label), label == "le" && strings.HasSuffix(m[2], "_bucket"):
				case !slices.Contains(e.labels, label):
					t.Errorf("%s: %s has no label %q (its labels: %v)", filepath.Base(f), name, label, e.labels)
				case slices.Contains(enumerated, label):
					for v := range strings.SplitSeq(val, "|") {
						if !e.values[v] {
							t.Errorf("%s: %s{%s} has no value %q in %s", filepath.Base(f), name, label, v, contractsDoc)
						}
					}
				}
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d series named in %s: is the pattern still right?", seen, rulesDir)
	}
}

// lookup finds ref in the contract: a metric, or a histogram's series
// (_bucket, _sum, _count).
func lookup(metrics map[string]exported, ref string) (string, exported, bool) {
	if e, ok := metrics[ref]; ok {
		return ref, e, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, cut := strings.CutSuffix(ref, suffix); cut {
			if e, ok := metrics[base]; ok && e.typ == "histogram" {
				return base, e, true
			}
		}
	}
	return ref, exported{}, false
}

// Every alert has a severity, a summary and a description, and its unit
// tests see it both firing and quiet; every recording rule is named
// level:metric:operations and its value is tested.
func TestEveryRuleIsDescribedAndTested(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(rulesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	alerts, alertTests := read("l4lb-alerts.rules.yml"), read("l4lb-alerts.test.yml")
	firing, quiet := evalCases(alertTests)
	severity := regexp.MustCompile(`(?m)^\s*severity: (critical|warning)$`)
	blocks := regexp.MustCompile(`(?m)^\s*- alert: `).Split(alerts, -1)[1:]
	if len(blocks) < 7 {
		t.Fatalf("only %d alerts in l4lb-alerts.rules.yml", len(blocks))
	}
	for _, b := range blocks {
		name, _, _ := strings.Cut(b, "\n")
		if !severity.MatchString(b) {
			t.Errorf("alert %s has no severity label (critical or warning)", name)
		}
		for _, want := range []string{"summary: ", "description: "} {
			if !strings.Contains(b, want) {
				t.Errorf("alert %s has no %q", name, want)
			}
		}
		if firing[name] == 0 || quiet[name] == 0 {
			t.Errorf("alert %s: %d firing and %d quiet cases in l4lb-alerts.test.yml; want both", name, firing[name], quiet[name])
		}
	}

	recording, recordingTests := read("l4lb-recording.rules.yml"), read("l4lb-recording.test.yml")
	levelMetricOps := regexp.MustCompile(`^[a-z_]+:l4lb_[a-z0-9_]+:[a-z0-9_]+$`)
	records := regexp.MustCompile(`(?m)^\s*- record: (\S+)$`).FindAllStringSubmatch(recording, -1)
	if len(records) == 0 {
		t.Fatal("no recording rules in l4lb-recording.rules.yml")
	}
	exprs := regexp.MustCompile(`(?m)^\s*- expr: (.*)$`).FindAllStringSubmatch(recordingTests, -1)
	for _, m := range records {
		if !levelMetricOps.MatchString(m[1]) {
			t.Errorf("recording rule %s is not named level:metric:operations", m[1])
		}
		if !slices.ContainsFunc(exprs, func(e []string) bool { return strings.Contains(e[1], m[1]) }) {
			t.Errorf("recording rule %s has no promql_expr_test in l4lb-recording.test.yml", m[1])
		}
	}
}

// evalCases counts, per alert, the alert_rule_test cases of a promtool
// test file that expect it firing and those that expect it quiet.
func evalCases(tests string) (firing, quiet map[string]int) {
	firing, quiet = map[string]int{}, map[string]int{}
	for _, c := range regexp.MustCompile(`(?m)^\s*- eval_time: `).Split(tests, -1)[1:] {
		m := regexp.MustCompile(`(?m)^\s*alertname: (\S+)$`).FindStringSubmatch(c)
		if m == nil {
			continue
		}
		if strings.Contains(c, "exp_alerts:") && !strings.Contains(c, "exp_alerts: []") {
			firing[m[1]]++
		} else {
			quiet[m[1]]++
		}
	}
	return firing, quiet
}
