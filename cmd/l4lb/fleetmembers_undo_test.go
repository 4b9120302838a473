package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/membership"
)

func fleetAddrs(t *testing.T, in *instance, pool string) []string {
	t.Helper()
	doc, _, err := in.store.fleet.MembersAt(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var list []membership.Added
	_ = json.Unmarshal(doc, &list)
	var out []string
	for _, a := range list {
		out = append(out, a.Addr)
	}
	slices.Sort(out)
	return out
}

func localAddrs(in *instance, pool string) []string {
	var out []string
	for _, a := range in.members.AddedBackends()[pool] {
		out = append(out, a.Addr)
	}
	slices.Sort(out)
	return out
}

// A change whose fleet write fails is undone on the members as they are
// then; another instance's record applied meanwhile is under that undo,
// so the members take the fleet's record again (memberChange.resync).
// Held as it was, the difference went to the whole fleet with the next
// change. Here r1's removal of W fails (its request was cancelled) while
// r2 removes W too: the undo puts W back on r1, and without the resync
// r1's next add wrote W back for every instance. (From a fresh-eyes
// review.)
func TestAFailedChangeTakesTheFleetsRecordAgain(t *testing.T) {
	srv := testnet.StartRedis(t)
	back := testnet.StartBackend(t, "b", "")
	in1, _ := startFile(t, fleetCluster(srv, "r1")+membersTestConfig(map[string]string{"fp": testnet.FreeAddr(t)}, []string{"p"}, back.Addr))
	in2, _ := startFile(t, fleetCluster(srv, "r2")+membersTestConfig(map[string]string{"fp": testnet.FreeAddr(t)}, []string{"p"}, back.Addr))
	m1, m2 := apiMembers{in1}, apiMembers{in2}
	const y, w, q = "127.0.9.1:80", "127.0.9.2:80", "127.0.9.3:80"
	for _, a := range []string{y, w} {
		if err := m1.AddBackend(context.Background(), "p", admin.NewBackend{Addr: a, Weight: 1}); err != nil {
			t.Fatal(err)
		}
	}
	testnet.Eventually(t, "r2 follows r1's adds", func() bool { return slices.Equal(localAddrs(in2, "p"), []string{y, w}) })

	cancelled, cancel := context.WithCancel(context.Background())
	cancel() // r1's request gave up: its fleet write fails (not a conflict)
	ch := in1.shared(cancelled, "p", memberChange{source: "api", apply: func(file *config.Config) (func(), error) {
		_, undo, err := in1.members.Remove(file.Pools["p"], w)
		return undo, err
	}})
	commit := ch.commit
	ch.commit = func() error {
		err := commit()
		// Between the commit's unlock and the undo: r2 removes W, and
		// r1's Run goroutine applies r2's record.
		if err := m2.RemoveBackend(context.Background(), "p", w, 0); err != nil {
			t.Errorf("r2's removal: %v", err)
		}
		testnet.Eventually(t, "r1's Run applies r2's record", func() bool {
			in1.fleetBases.mu.Lock()
			defer in1.fleetBases.mu.Unlock()
			_, v, _ := in1.store.fleet.MembersAt(context.Background(), "p")
			return in1.fleetBases.version["p"] == v
		})
		return err
	}
	if err := in1.changeMembers(ch); err == nil {
		t.Fatal("r1's change with a cancelled request succeeded")
	}
	time.Sleep(time.Second) // any healing read has had its chance
	if got, fleet := localAddrs(in1, "p"), fleetAddrs(t, in1, "p"); !slices.Equal(got, fleet) {
		t.Errorf("r1's members %v differ from the fleet's record %v it holds as its base", got, fleet)
	}
	if err := m1.AddBackend(context.Background(), "p", admin.NewBackend{Addr: q, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	if fleet := fleetAddrs(t, in1, "p"); slices.Contains(fleet, w) {
		t.Fatalf("r2's removal of %s is lost fleet-wide: r1's next add wrote %v", w, fleet)
	}
}
