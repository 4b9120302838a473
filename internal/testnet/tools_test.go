package testnet

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// verdict is a testing.TB that records how a helper ended the test.
type verdict struct {
	testing.TB
	failed, skipped string
}

func (v *verdict) Helper()                           {}
func (v *verdict) Fatalf(format string, args ...any) { v.failed = fmt.Sprintf(format, args...) }
func (v *verdict) Skipf(format string, args ...any)  { v.skipped = fmt.Sprintf(format, args...) }

// A missing tool fails the test as root or under CI, naming the apt-get
// line, and skips otherwise; a tool that is there is found (in sbin too).
func TestMissingToolFailsAsRoot(t *testing.T) {
	v := &verdict{TB: t}
	if p := NeedTool(v, "l4lb-no-such-tool", "l4lb-no-such-package"); p != "" {
		t.Fatalf("found %q", p)
	}
	must := os.Geteuid() == 0 || os.Getenv("CI") != ""
	switch {
	case must && (v.failed == "" || v.skipped != ""):
		t.Fatalf("as root or under CI a missing tool did not fail the test: failed %q, skipped %q", v.failed, v.skipped)
	case !must && (v.skipped == "" || v.failed != ""):
		t.Fatalf("neither root nor CI, a missing tool did not skip the test: failed %q, skipped %q", v.failed, v.skipped)
	}
	if msg := v.failed + v.skipped; !strings.Contains(msg, "apt-get install l4lb-no-such-package") {
		t.Fatalf("the message does not say how to install it: %q", msg)
	}
	if p := ToolPath("sh"); p == "" {
		t.Fatal("sh not found")
	}
}

// The headline tests fail without root unless skipping is asked for.
func TestRequireRootFailsUnlessSkipAsked(t *testing.T) {
	if os.Geteuid() == 0 {
		v := &verdict{TB: t}
		RequireRoot(v, "x")
		if v.failed != "" || v.skipped != "" {
			t.Fatalf("as root: failed %q, skipped %q", v.failed, v.skipped)
		}
		return
	}
	t.Setenv(allowNoRootEnv, "")
	v := &verdict{TB: t}
	RequireRoot(v, "x")
	if v.failed == "" {
		t.Fatal("without root and without the variable, the test did not fail")
	}
	t.Setenv(allowNoRootEnv, "1")
	v = &verdict{TB: t}
	RequireRoot(v, "x")
	if v.skipped == "" || v.failed != "" {
		t.Fatalf("with the variable: failed %q, skipped %q", v.failed, v.skipped)
	}
}
