package config

import (
	"errors"
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
