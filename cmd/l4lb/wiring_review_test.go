package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunAndDemoHelp: "l4lb run -h" and "l4lb demo -h" print their own
// usage on stdout and exit 0, as "l4lb check -h" does (the usage says "-h
// after a command: that command's usage"), not the flag package's "Usage
// of run:" on stderr with exit 2.
func TestRunAndDemoHelp(t *testing.T) {
	for _, cmd := range []string{"run", "demo"} {
		var out, errb bytes.Buffer
		code := run([]string{cmd, "-h"}, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "usage: l4lb "+cmd) || errb.Len() != 0 {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q; want its usage on stdout and exit 0", cmd, code, out.String(), errb.String())
		}
		if strings.Contains(out.String()+errb.String(), "Usage of") {
			t.Errorf("%s -h prints the flag package's usage", cmd)
		}
		out.Reset()
		errb.Reset()
		if code := run([]string{cmd, "-nosuchflag"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: l4lb "+cmd) {
			t.Errorf("%s -nosuchflag: exit %d, stderr %q; want 2 and the usage on stderr", cmd, code, errb.String())
		}
	}
}
