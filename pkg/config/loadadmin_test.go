package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// LoadAdmin reads [admin] with its defaults and checks, and ignores the
// rest of the file, errors included.
func TestLoadAdmin(t *testing.T) {
	write := func(text string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "l4lb.toml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a, err := LoadAdmin(write("[admin]\nlisten = \"127.0.0.1:9100\"\ntoken_file = \"/etc/l4lb/token\"\n[pool.p]\nalgorithm = \"no-such\"\n"))
	if err != nil || a.Listen != "127.0.0.1:9100" || a.TokenFile != "/etc/l4lb/token" || a.MaxConnections != DefaultAdmin().MaxConnections {
		t.Fatalf("LoadAdmin: %+v %v", a, err)
	}
	if a, err := LoadAdmin(write("[[listener]]\nname = \"x\"\n")); err != nil || a != DefaultAdmin() {
		t.Fatalf("a file without [admin]: %+v %v, want the defaults", a, err)
	}
	var errs Errors
	_, err = LoadAdmin(write("\n[admin]\nlisten = \"nowhere\"\n"))
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Line != 3 || !strings.Contains(errs[0].Msg, "not host:port") {
		t.Fatalf("a bad listen: %v, want one error on line 3", err)
	}
	if _, err := LoadAdmin(write("[admin\n")); err == nil || !strings.Contains(err.Error(), "TOML syntax error") {
		t.Fatalf("a file that is not TOML: %v", err)
	}
	if _, err := LoadAdmin(filepath.Join(t.TempDir(), "none.toml")); err == nil || !strings.Contains(err.Error(), "none.toml") {
		t.Fatalf("a missing file: %v", err)
	}
}
