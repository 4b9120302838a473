package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A key a reload does not apply keeps its running value until an upgrade
// or a restart, and every reload of a file that still changes it says so,
// not only the first: the warning compares the file with what runs, not
// with the file the previous reload read. A file that returns to the
// running value warns of nothing.
func TestReloadWarnsWhileTheFileDiffersFromWhatRuns(t *testing.T) {
	b1 := testnet.StartBackend(t, "b1", "")
	front := testnet.FreeAddr(t)
	render := func(pipeSize, backlog int) string {
		return fmt.Sprintf("[global]\npipe_size = %d\n[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\nbacklog = %d\npool = \"p\"\n[pool.p]\n[[pool.p.backend]]\naddr = %q\n",
			pipeSize, front, backlog, b1.Addr)
	}
	in, path := startFile(t, render(1<<20, 0))
	reload := func(text string) []string {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		res, errs := in.reload()
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return res.Warnings
	}
	has := func(ws []string, key string) bool {
		for _, w := range ws {
			if strings.HasPrefix(w, key+" changed") {
				return true
			}
		}
		return false
	}
	for i := range 2 {
		ws := reload(render(65536, 64))
		if !has(ws, "[global] pipe_size") || !has(ws, `listener "front" backlog`) {
			t.Fatalf("reload %d of a file whose pipe_size and backlog differ from the running ones: warnings %q, want both named", i+1, ws)
		}
	}
	if ws := reload(render(1<<20, 0)); len(ws) != 0 {
		t.Fatalf("a file back at the running values warns %q", ws)
	}
}
