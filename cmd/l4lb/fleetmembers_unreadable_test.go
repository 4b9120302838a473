package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
)

var _ admin.FleetMembership = apiMembers{} // the replace route finds it

// fleetCluster is the [cluster] of an instance named name on srv.
func fleetCluster(srv *testnet.Redis, name string) string {
	return fmt.Sprintf("[cluster]\nstore = \"redis\"\nredis_url = %q\ninstance = %q\ntimeout = \"500ms\"\nsync_interval = \"2s\"\n", srv.URL(), name)
}

// serves reports whether in's live pool serves addr.
func serves(in *instance, pool, addr string) bool {
	for _, lp := range in.livePools() {
		if _, ok := lp.Backend(addr); ok && lp.Name == pool {
			return true
		}
	}
	return false
}

// fleetPair is two instances, r1 and r2, in a fleet on a new Redis with
// one pool p, to which r1 added y through the API and which r2 follows.
func fleetPair(t *testing.T, y string) (srv *testnet.Redis, in1, in2 *instance) {
	t.Helper()
	srv = testnet.StartRedis(t)
	back := testnet.StartBackend(t, "b", "")
	in1, _ = startFile(t, fleetCluster(srv, "r1")+membersTestConfig(map[string]string{"fp": testnet.FreeAddr(t)}, []string{"p"}, back.Addr))
	in2, _ = startFile(t, fleetCluster(srv, "r2")+membersTestConfig(map[string]string{"fp": testnet.FreeAddr(t)}, []string{"p"}, back.Addr))
	if err := (apiMembers{in1}).AddBackend(context.Background(), "p", admin.NewBackend{Addr: y, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "r2 follows r1's add", func() bool { return slices.Equal(localAddrs(in2, "p"), []string{y}) })
	return srv, in1, in2
}

// A fleet record of a pool's API additions that this build cannot read:
// every change fails at once as unreadable (502, naming the pool and the
// key), not 409 after 8 tries, as every change did, forever; both
// instances keep serving what they last read; and the replace (the admin
// API's fleet-members/replace) writes one instance's list over it, which
// the other follows, and changes work again.
func TestUnreadableFleetRecordKeepsTheMembersUntilReplaced(t *testing.T) {
	const y, q = "127.0.9.1:80", "127.0.9.3:80"
	srv, in1, in2 := fleetPair(t, y)
	m1, m2 := apiMembers{in1}, apiMembers{in2}
	ctx := context.Background()

	key := config.DefaultCluster().KeyPrefix + "{members}:p"
	_, good, err := in1.store.fleet.MembersAt(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// Another build's record, at a version after the last good one.
	bad := strconv.FormatUint(good+1000, 10) + ` {"backends":[]}`
	if _, err := srv.Do("SET", key, bad); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who    string
		change func() error
	}{
		{"r1's add", func() error { return m1.AddBackend(ctx, "p", admin.NewBackend{Addr: q, Weight: 1}) }},
		{"r2's add", func() error { return m2.AddBackend(ctx, "p", admin.NewBackend{Addr: q, Weight: 1}) }},
		{"r1's remove", func() error { return m1.RemoveBackend(ctx, "p", y, 0) }},
	} {
		err := tc.change()
		if !errors.Is(err, admin.ErrUnreadable) || errors.Is(err, admin.ErrRefused) {
			t.Fatalf("%s on an unreadable record: %v, want unreadable (502), no conflict (409)", tc.who, err)
		}
		for _, want := range []string{"pool p", key, "fleet-members/replace"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %q does not name %q", tc.who, err, want)
			}
		}
	}
	time.Sleep(time.Second) // the record's invalidation has reached both instances
	for _, in := range []*instance{in1, in2} {
		if got := localAddrs(in, "p"); !slices.Equal(got, []string{y}) || !serves(in, "p", y) || serves(in, "p", q) {
			t.Fatalf("members %v after an unreadable record (serving %s: %v), want the last good [%s]", got, y, serves(in, "p", y), y)
		}
	}
	if v, _ := srv.Do("GET", key); v != bad {
		t.Fatalf("redis holds %q, want the unreadable record untouched", v)
	}

	if err := m2.ReplaceUnreadable(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := m2.ReplaceUnreadable(ctx, "p"); !errors.Is(err, admin.ErrNothingToReplace) {
		t.Fatalf("a second replace: %v, want nothing to replace (409)", err)
	}
	if err := m1.AddBackend(ctx, "p", admin.NewBackend{Addr: q, Weight: 1}); err != nil {
		t.Fatalf("r1's add after the replace: %v", err)
	}
	testnet.Eventually(t, "r2 follows r1's add after the replace", func() bool {
		return slices.Equal(localAddrs(in2, "p"), []string{y, q}) && serves(in2, "p", q)
	})
	if got := fleetAddrs(t, in1, "p"); !slices.Equal(got, []string{y, q}) {
		t.Fatalf("the fleet's record %v", got)
	}
}
