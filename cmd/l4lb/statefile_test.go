package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The state file's replacement is durable: the directory holding it is
// fsynced after the rename (the rename is an entry of the directory; a
// crash before that sync can bring the old file back), and a failed sync
// is an error, not a silent success.
func TestWriteAtomicSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	real := syncDir
	defer func() { syncDir = real }()
	var synced []string
	syncDir = func(d string) error {
		if got, _ := os.ReadFile(path); string(got) != "new" {
			t.Errorf("directory synced before the rename: the file holds %q", got)
		}
		synced = append(synced, d)
		return real(d)
	}
	if err := writeAtomic(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced: %q, want [%q]", synced, dir)
	}

	failed := errors.New("EIO")
	syncDir = func(string) error { return failed }
	if err := writeAtomic(path, []byte("newer")); !errors.Is(err, failed) {
		t.Fatalf("a failed directory sync: %v, want it returned", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left beside the state file: %v", entries)
	}
}
