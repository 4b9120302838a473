package fleet

import (
	"errors"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A change C made, and was told succeeded, on version V, survives Redis
// losing its data (FLUSHALL, or a failover to a replica without C's
// write) when A, which heard of it, makes a change of its own on V: the
// script would take it (Redis holds nothing, below A's base), and its
// version, above C's copy, would keep that copy from being written back.
// A's Store refuses it instead. (An instance that never heard of C's
// change can still do this: members.go says so.)
func TestMembers_AChangeOnABaseOlderThanTheCopyIsRefused(t *testing.T) {
	h := newFleet(t)
	a, c := h.store(nil, Options{}), h.store(nil, Options{})
	put(t, a, "web", docOne)
	_, base, err := a.MembersAt(h.ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "C knows V", func() bool {
		_, v, err := c.MembersAt(h.ctx, "web")
		return err == nil && v == base
	})
	const docC = `[{"addr":"10.0.0.1:80","weight":1},{"addr":"10.0.0.3:80","weight":1}]`
	vC, err := c.PutMembers(h.ctx, "web", []byte(docC), base)
	if err != nil {
		t.Fatalf("C's change: %v", err)
	}
	testnet.Eventually(t, "A hears of C's change", func() bool {
		_, v, err := a.MembersAt(h.ctx, "web")
		return err == nil && v == vC
	})
	if _, err := h.srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	const docA = `[{"addr":"10.0.0.1:80","weight":1},{"addr":"10.0.0.4:80","weight":1}]`
	if _, err := a.PutMembers(h.ctx, "web", []byte(docA), base); !errors.Is(err, ErrMembersChanged) {
		t.Fatalf("A's change on version %d, older than the %d it knows, after the flush: %v, want ErrMembersChanged", base, vC, err)
	}
	testnet.Eventually(t, "C's change written back", func() bool {
		v, doc := h.rawMembers("web")
		return v == vC && doc == docC
	})
}
