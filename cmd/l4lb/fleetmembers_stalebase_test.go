package main

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/fleet"
)

// An instance's base of a change (fleetBases) moves when readFleet reads
// the pool's record; the fleet store learns a record first, and tells
// readFleet after. A record made unreadable between the two kept readFleet
// from ever reading (so the base stayed), while the store, knowing a newer
// copy than that base, refused each try as changed meanwhile: 409 after 8
// tries, the behaviour an unreadable record was to end (found in review).
// Now the change fails at once as unreadable (502), and the instance takes
// the store's last good copy, which is what it keeps serving.
func TestUnreadableFleetRecordAfterAnUnreadCopyFailsAtOnce(t *testing.T) {
	const y, q, z = "127.0.9.1:80", "127.0.9.3:80", "127.0.9.5:80"
	srv, in1, in2 := fleetPair(t, y)
	m1, m2 := apiMembers{in1}, apiMembers{in2}
	ctx := context.Background()

	// The window, held open: r1's store learns r2's record, and r1's
	// members are not told of it.
	in1.stopFleetMembers()
	if err := m2.AddBackend(ctx, "p", admin.NewBackend{Addr: q, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	_, v2, err := in2.store.fleet.MembersAt(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "r1's store learns r2's record", func() bool {
		_, v, err := in1.store.fleet.MembersAt(ctx, "p")
		return err == nil && v == v2
	})
	key := config.DefaultCluster().KeyPrefix + "{members}:p"
	if _, err := srv.Do("SET", key, "another build's record"); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "r1's store reads the record unreadable", func() bool {
		_, _, err := in1.store.fleet.MembersAt(ctx, "p")
		return errors.Is(err, fleet.ErrMembersUnreadable)
	})

	err = m1.AddBackend(ctx, "p", admin.NewBackend{Addr: z, Weight: 1})
	if !errors.Is(err, admin.ErrUnreadable) || errors.Is(err, admin.ErrRefused) {
		t.Fatalf("r1's add, on a base behind its store's copy, over an unreadable record: %v, want unreadable (502), no conflict (409)", err)
	}
	testnet.Eventually(t, "r1 serves its store's last good copy", func() bool {
		return slices.Equal(localAddrs(in1, "p"), []string{y, q}) && serves(in1, "p", q) && !serves(in1, "p", z)
	})
	in1.fleetBases.mu.Lock()
	base := in1.fleetBases.version["p"]
	in1.fleetBases.mu.Unlock()
	if base != v2 {
		t.Fatalf("r1's base %d, want its store's copy's %d", base, v2)
	}
	if err := m1.RemoveBackend(ctx, "p", y, 0); !errors.Is(err, admin.ErrUnreadable) {
		t.Fatalf("r1's next change: %v, want unreadable (502)", err)
	}
	if v, _ := srv.Do("GET", key); v != "another build's record" {
		t.Fatalf("redis holds %q, want the unreadable record untouched", v)
	}
}
