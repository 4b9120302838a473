package handoff

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/membership"
	"github.com/l4lb/l4lb/pkg/pool"
)

// membersOf is a Set with an API-added backend in pool web and a
// discovered one.
func membersOf(t *testing.T) *membership.Set {
	t.Helper()
	cfg, err := config.Parse("m.toml", []byte("[admin]\nlisten = \"\"\n[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"+
		"[pool.web]\n[[pool.web.backend]]\naddr = \"10.0.0.1:80\"\n[pool.web.discovery]\ndns = \"web.test:80\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := membership.New()
	if _, err := s.Add(cfg.Pools["web"], membership.Added{Addr: "10.0.0.5:80", Weight: 3, ID: "five"}); err != nil {
		t.Fatal(err)
	}
	d := config.DefaultBackend()
	d.Addr, d.Weight, d.MaxConnections = "10.0.0.9:80", 4, 10
	s.Discovered("web", []config.Backend{d})
	return s
}

func TestMembersTravelInTheUpgradeState(t *testing.T) {
	st := Capture(breaker.NewMemoryStore(nil), nil, "test")
	st.setMembers(membersOf(t))
	if st.Version != 3 {
		t.Fatalf("a document with members is version %d, want 3", st.Version)
	}
	var buf bytes.Buffer
	if err := st.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	next := membership.New()
	if !got.RestoreMembers(next) {
		t.Fatal("the discovered set did not travel")
	}
	if a := next.AddedBackends()["web"]; len(a) != 1 || a[0] != (membership.Added{Addr: "10.0.0.5:80", Weight: 3, ID: "five"}) {
		t.Fatalf("added backends after the upgrade: %+v", a)
	}
	d := next.DiscoveredBackends()["web"]
	if len(d) != 1 || d[0].Addr != "10.0.0.9:80" || d[0].Weight != 4 || d[0].MaxConnections != 10 || d[0].Source != config.BackendFromDNS {
		t.Fatalf("discovered backends after the upgrade: %+v", d)
	}
}

func TestStateFileKeepsTheAPIsBackends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	sf := NewStateFile(path, slog.New(slog.DiscardHandler))
	set := membersOf(t)
	sf.KeepMembers(set)
	sf.Save(breaker.NewMemoryStore(nil), func() []*pool.Pool { return nil })
	// A restart: the additions come back; discovered sets are looked up
	// afresh, not kept.
	next := membership.New()
	discovered, err := (&Inheritance{}).Members(NewStateFile(path, slog.New(slog.DiscardHandler)), next, slog.New(slog.DiscardHandler))
	if err != nil || discovered {
		t.Fatalf("Members: %v, discovered %v", err, discovered)
	}
	if !reflect.DeepEqual(next.AddedBackends(), set.AddedBackends()) {
		t.Fatalf("after a restart the API's backends are %+v, want %+v", next.AddedBackends(), set.AddedBackends())
	}
	if len(next.DiscoveredBackends()) != 0 {
		t.Fatal("the state file kept a discovered set")
	}
}

func TestNoMembersWritesVersion2(t *testing.T) {
	st := Capture(breaker.NewMemoryStore(nil), nil, "test")
	st.setMembers(membership.New())
	if st.Version != 2 || st.Members != nil {
		t.Fatalf("a document without members: version %d, members %+v; want version 2 for the build before", st.Version, st.Members)
	}
}
