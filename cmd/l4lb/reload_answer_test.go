package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The reload's answer has every key of its contract (docs/contracts.md),
// warnings as [] when there are none, so a script can read it without
// checking for its absence.
func TestReloadAnswerListsWarningsEvenWhenNone(t *testing.T) {
	b := testnet.StartBackend(t, "b", "")
	in, _ := startFile(t, fmt.Sprintf("[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n[pool.p]\n[[pool.p.backend]]\naddr = %q\n",
		testnet.FreeAddr(t), b.Addr))
	res, errs := in.reload()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	doc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"result":"ok"`, `"hash":`, `"listeners_kept":1`, `"listeners_added":0`, `"listeners_removed":0`, `"pools":1`, `"warnings":[]`} {
		if !strings.Contains(string(doc), key) {
			t.Errorf("the answer lacks %s: %s", key, doc)
		}
	}
}
