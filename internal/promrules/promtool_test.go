package promrules

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// rulesDir is where the shipped rules and their unit tests live.
const rulesDir = "../../dist/prometheus"

// shipped returns the rule files (*.rules.yml) and their unit tests
// (*.test.yml, one per rule file) in dir.
func shipped(t *testing.T, dir string) (rules, tests []string) {
	t.Helper()
	rules, _ = filepath.Glob(filepath.Join(dir, "*.rules.yml"))
	if len(rules) == 0 {
		t.Fatalf("no *.rules.yml in %s", dir)
	}
	for _, r := range rules {
		test := strings.TrimSuffix(r, ".rules.yml") + ".test.yml"
		if _, err := os.Stat(test); err != nil {
			t.Errorf("%s has no unit tests beside it: %v", r, err)
		}
		tests = append(tests, test)
	}
	return rules, tests
}

// promtool runs Debian's promtool (package prometheus) with args in dir:
// its output, and whether it exited 0.
func promtool(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	bin := testnet.NeedTool(t, "promtool", "prometheus")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
	return string(out), err == nil
}

// Every shipped rule file is valid for the Prometheus that .ci/run
// installs (Debian's, 2.42 in bookworm).
func TestShippedRulesPassPromtoolCheck(t *testing.T) {
	rules, _ := shipped(t, rulesDir)
	if out, ok := promtool(t, rulesDir, append([]string{"check", "rules"}, names(rules)...)...); !ok {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// The unit tests beside the rules pass: each alert fires and stays quiet
// where it must, and every recorded series has its value.
func TestShippedRulesPassTheirUnitTests(t *testing.T) {
	_, tests := shipped(t, rulesDir)
	if out, ok := promtool(t, rulesDir, append([]string{"test", "rules"}, names(tests)...)...); !ok {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// The unit tests can fail: the probe alert rewritten to fire on a trip,
// the alert the seed warns against, fails them.
func TestUnitTestsRefuseAProbeAlertThatFiresOnTrips(t *testing.T) {
	const alerts = "l4lb-alerts.rules.yml"
	const probe = "l4lb_breaker_probe_failed == 1"
	dir := t.TempDir()
	for _, name := range []string{alerts, "l4lb-alerts.test.yml"} {
		data, err := os.ReadFile(filepath.Join(rulesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == alerts {
			if !strings.Contains(string(data), probe) {
				t.Fatalf("%s no longer has %q: update this test", alerts, probe)
			}
			data = []byte(strings.Replace(string(data), probe, "l4lb_breaker_open == 1", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, ok := promtool(t, dir, "test", "rules", "l4lb-alerts.test.yml")
	if ok || !strings.Contains(out, "L4LBBreakerProbeFailed") {
		t.Fatalf("a probe alert that fires on trips passed the unit tests (ok %v):\n%s", ok, out)
	}
}

func names(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}
