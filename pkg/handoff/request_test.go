package handoff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// l4lb upgrade's wait reads the outcome from the pid file: rewritten with
// another live pid, the upgrade took; rewritten with the same pid, it
// failed; a pid file that names a process gone, or no rewrite in time, is
// no success either.
func TestAwaitReadsTheOutcomeFromThePIDFile(t *testing.T) {
	const old = 1 // a pid the rewrites below never name as the new one
	for _, tc := range []struct {
		name    string
		rewrite int // 0: none
		want    int
		err     string
	}{
		{"handed over", os.Getpid(), os.Getpid(), ""},
		{"failed", old, 0, "failed: pid 1 is still serving"},
		{"gone", 1 << 22, 0, "which is gone"},
		{"no outcome", 0, 0, "no outcome within 200ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pid")
			if err := WritePIDFile(path, old); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.rewrite != 0 {
				if err := WritePIDFile(path, tc.rewrite); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Await(path, before, old, 200*time.Millisecond)
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Await: %d %v; want %d, error %q", got, err, tc.want, tc.err)
			}
		})
	}
}
