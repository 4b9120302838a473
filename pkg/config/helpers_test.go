package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Test sources mark the line an error must be reported on with "#!".

const (
	listenerWeb = "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"
	poolWeb     = "[pool.web]\n[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n"
	validBase   = listenerWeb + poolWeb
)

// withListener is a valid file whose only listener has the given keys.
func withListener(keys string) string { return "[[listener]]\n" + keys + poolWeb }

// withPool is a valid file whose pool web has the given keys (and one backend).
func withPool(keys string) string {
	return listenerWeb + "[pool.web]\n" + keys + "[[pool.web.backend]]\naddr = \"127.0.0.1:9001\"\n"
}

// withBackends is a valid file whose pool web has the given backend tables.
func withBackends(backends string) string { return listenerWeb + "[pool.web]\n" + backends }

// markedLine returns the 1-based line holding "#!", or 0 if none does.
func markedLine(t *testing.T, src string) int {
	t.Helper()
	for i, line := range strings.Split(src, "\n") {
		if strings.Contains(line, "#!") {
			return i + 1
		}
	}
	return 0
}

// parseErrors parses src and returns its Errors, failing if it parses.
func parseErrors(t *testing.T, src string) Errors {
	t.Helper()
	cfg, err := Parse("test.toml", []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded, want an error; source:\n%s", src)
	}
	if cfg != nil {
		t.Errorf("Parse returned a Config along with errors")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want Errors: %v", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false")
	}
	return errs
}

// mustParse parses src and fails the test on any error.
func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Parse("test.toml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\nsource:\n%s", err, src)
	}
	return cfg
}

// problem is a source with exactly one problem: at key, on the line marked
// "#!" (or line 0 when none is marked), with a message containing msg.
type problem struct {
	name string
	src  string
	key  string
	msg  string
}

// wantOneError checks that errs is exactly the one problem p describes.
func wantOneError(t *testing.T, p problem, errs Errors) {
	t.Helper()
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
	}
	e := errs[0]
	if e.Key != p.key {
		t.Errorf("key = %q, want %q (error: %v)", e.Key, p.key, e)
	}
	if want := markedLine(t, p.src); e.Line != want {
		t.Errorf("line = %d, want %d (error: %v)", e.Line, want, e)
	}
	if !strings.Contains(e.Msg, p.msg) {
		t.Errorf("message = %q, want it to contain %q", e.Msg, p.msg)
	}
	if e.File != "test.toml" {
		t.Errorf("file = %q, want test.toml", e.File)
	}
}

// listeners is a file with one listener per bind (named l0, l1, ...), all
// serving pool web, which has the given backend addresses.
func listeners(binds []string, backends ...string) string {
	var b strings.Builder
	for i, bind := range binds {
		fmt.Fprintf(&b, "[[listener]]\nname = \"l%d\"\nbind = %s\npool = \"web\"\n", i, bind)
	}
	b.WriteString("[pool.web]\n")
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.web.backend]]\naddr = %s\n", a)
	}
	return b.String()
}
