package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The connections an upgrade's old process holds count against
// max_connections when the file sets it, not when it is derived from the
// fd limit (max_connections = 0: this process's fds; the old process's
// connections hold its own), and a reload between the two applies the
// change at once (docs/operations.md, "Upgrading the binary").
func TestReloadBetweenASetAndADerivedCapCountsTheOldProcessOrNot(t *testing.T) {
	b1 := testnet.StartBackend(t, "b1", "")
	front := testnet.FreeAddr(t)
	render := func(max int) string {
		return fmt.Sprintf("[global]\nmax_connections = %d\n[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n[pool.p]\n[[pool.p.backend]]\naddr = %q\n",
			max, front, b1.Addr)
	}
	in, path := startFile(t, render(2))
	in.server.HeldElsewhere(2) // as the old process reports
	reload := func(max int) {
		t.Helper()
		if err := os.WriteFile(path, []byte(render(max)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errs := in.reload(); len(errs) > 0 {
			t.Fatal(errs)
		}
	}
	admitted := func(when string, want bool) {
		t.Helper()
		tag, err := testnet.Hello(front, "")
		switch {
		case want && (err != nil || tag != "b1"):
			t.Fatalf("%s: a client got %q, %v; want it served", when, tag, err)
		case !want && err == nil:
			t.Fatalf("%s: a client was served (%q); want it refused at the cap", when, tag)
		case !want && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET):
			t.Fatalf("%s: %v; want a refusal (an end of stream or a reset)", when, err)
		}
	}
	admitted("max_connections = 2, 2 held by the old process", false)
	reload(0)
	derived := in.server.MaxConnections()
	in.server.HeldElsewhere(derived) // a whole cap's worth there
	admitted(fmt.Sprintf("max_connections derived from the fd limit (%d), as many held by the old process", derived), true)
	reload(2)
	admitted("max_connections = 2 again", false)
	in.server.HeldElsewhere(0)
	admitted("max_connections = 2, none held by the old process", true)
}
