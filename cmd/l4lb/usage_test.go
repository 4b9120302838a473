package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpPrintsTheUsage: asking for help is no error, and the text is the
// command's own, listing every subcommand, not the flag package's "Usage
// of run:".
func TestHelpPrintsTheUsage(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		var out, errb bytes.Buffer
		code := run([]string{arg}, &out, &errb)
		if code != 0 {
			t.Errorf("l4lb %s: exit %d, want 0; stderr %q", arg, code, errb.String())
		}
		text := out.String()
		if strings.Contains(text+errb.String(), "Usage of") {
			t.Errorf("l4lb %s prints the flag package's usage:\n%s%s", arg, text, errb.String())
		}
		for _, want := range []string{"l4lb [run] -config FILE", "l4lb check -config FILE", "l4lb demo [-config FILE]", "l4lb ctl [-admin ADDR]", "l4lb version", "-version, --version", "-h, -help, --help", "exit status"} {
			if !strings.Contains(text, want) {
				t.Errorf("l4lb %s: usage lacks %q:\n%s", arg, want, text)
			}
		}
	}
}

func TestVersionFlags(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var out, errb bytes.Buffer
		if code := run([]string{arg}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "l4lb ") || errb.Len() != 0 {
			t.Errorf("l4lb %s: exit %d, stdout %q, stderr %q; want the version and exit 0", arg, code, out.String(), errb.String())
		}
	}
}

// TestSubcommandHelp: "l4lb check -h" prints check's usage on stdout and
// exits 0; a flag check does not know is a usage error (exit 2) with the
// usage on stderr.
func TestSubcommandHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "usage: l4lb check -config FILE") || errb.Len() != 0 {
		t.Errorf("check -h: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "-config FILE") {
		t.Errorf("check -h does not show its flag:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"check", "-colour"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "flag provided but not defined: -colour") || !strings.Contains(errb.String(), "usage: l4lb check") || out.Len() != 0 {
		t.Errorf("check -colour: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestUnknownCommandPrintsTheUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "serve"`) || !strings.Contains(errb.String(), "l4lb check -config FILE") {
		t.Errorf("l4lb serve: exit %d, stderr %q", code, errb.String())
	}
}

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

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "l4lb ") {
		t.Fatalf("version: code %d, %q", code, out.String())
	}
	if code := run([]string{"bogus"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "bogus"`) {
		t.Fatalf("unknown command: code %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-config FILE is required") {
		t.Fatalf("no config: code %d, %q", code, errb.String())
	}
}
