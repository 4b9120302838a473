package membership

import (
	"errors"
	"slices"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

func fileConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("m.toml", []byte("[admin]\nlisten = \"\"\n[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"+
		"[pool.web]\nalgorithm = \"maglev\"\n[[pool.web.backend]]\naddr = \"10.0.0.1:80\"\n[[pool.web.backend]]\naddr = \"10.0.0.2:80\"\nid = \"two\"\n"+
		"[pool.web.discovery]\ndns = \"web.test:80\"\n"+extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func addrsOf(p *config.Pool) []string {
	var out []string
	for _, b := range p.Backends {
		out = append(out, b.Addr+"/"+b.Source)
	}
	return out
}

func dnsBackends(addrs ...string) []config.Backend {
	var out []config.Backend
	for _, a := range addrs {
		out = append(out, config.Backend{Addr: a, Weight: 1})
	}
	return out
}

func TestPoolsOrderFileThenDNSThenAPI(t *testing.T) {
	cfg := fileConfig(t, "")
	s := New()
	if !s.Discovered("web", dnsBackends("10.0.0.9:80", "10.0.0.3:80", "10.0.0.1:80")) {
		t.Fatal("a first discovered set reported no change")
	}
	if s.Discovered("web", dnsBackends("10.0.0.1:80", "10.0.0.9:80", "10.0.0.3:80")) {
		t.Fatal("the same set in another order reported a change")
	}
	if _, err := s.Add(cfg.Pools["web"], Added{Addr: "[::ffff:10.0.0.7]:80", Weight: 2}); err != nil {
		t.Fatal(err)
	}
	got := addrsOf(s.Pools(cfg).Pools["web"])
	want := []string{"10.0.0.1:80/file", "10.0.0.2:80/file", "10.0.0.3:80/dns", "10.0.0.9:80/dns", "10.0.0.7:80/api"}
	if !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v (the file's first, its 10.0.0.1 over DNS's; an address normalised)", got, want)
	}
	if len(cfg.Pools["web"].Backends) != 2 {
		t.Fatal("Pools changed the file's configuration")
	}
}

func TestAddRefusesWhatThePoolHas(t *testing.T) {
	cfg := fileConfig(t, "")
	p := cfg.Pools["web"]
	s := New()
	s.Discovered("web", dnsBackends("10.0.0.3:80"))
	for _, tc := range []struct {
		a    Added
		want error
	}{
		{Added{Addr: "10.0.0.1:80", Weight: 1}, ErrExists},
		{Added{Addr: "10.0.0.3:80", Weight: 1}, ErrExists},
		{Added{Addr: "10.0.0.5:80", Weight: 1, ID: "two"}, ErrInvalid},
		{Added{Addr: "10.0.0.5:80", Weight: 1, ID: "10.0.0.1:80"}, ErrInvalid},
		{Added{Addr: "web.test:80", Weight: 1}, ErrInvalid},
	} {
		if _, err := s.Add(p, tc.a); !errors.Is(err, tc.want) {
			t.Errorf("add %+v: %v, want %v", tc.a, err, tc.want)
		}
	}
	undo, err := s.Add(p, Added{Addr: "10.0.0.5:80", Weight: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(p, Added{Addr: "10.0.0.5:80", Weight: 3}); !errors.Is(err, ErrExists) {
		t.Fatalf("second add of one address: %v", err)
	}
	undo()
	if n := len(s.Pools(cfg).Pools["web"].Backends); n != 3 {
		t.Fatalf("%d backends after the undo, want 3", n)
	}
}

func TestRemoveOnlyWhatTheAPIAdded(t *testing.T) {
	cfg := fileConfig(t, "")
	p := cfg.Pools["web"]
	s := New()
	s.Discovered("web", dnsBackends("10.0.0.3:80"))
	if _, err := s.Add(p, Added{Addr: "10.0.0.5:80", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]error{"10.0.0.1:80": ErrNotRemovable, "10.0.0.3:80": ErrNotRemovable, "10.0.0.8:80": ErrNoBackend, "nonsense": ErrNoBackend} {
		if _, _, err := s.Remove(p, addr); !errors.Is(err, want) {
			t.Errorf("remove %s: %v, want %v", addr, err, want)
		}
	}
	spelled, undo, err := s.Remove(p, "[::ffff:10.0.0.5]:80")
	if err != nil || spelled != "10.0.0.5:80" {
		t.Fatalf("remove by another spelling: %q %v", spelled, err)
	}
	if n := len(s.Pools(cfg).Pools["web"].Backends); n != 3 {
		t.Fatalf("%d backends after the remove, want 3", n)
	}
	undo()
	if got := s.AddedBackends()["web"]; len(got) != 1 || got[0].Addr != "10.0.0.5:80" {
		t.Fatalf("after the undo the API has %v", got)
	}
}

func TestHiddenAPIBackendAndSettle(t *testing.T) {
	cfg := fileConfig(t, "")
	p := cfg.Pools["web"]
	s := New()
	if _, err := s.Add(p, Added{Addr: "10.0.0.5:80", Weight: 4}); err != nil {
		t.Fatal(err)
	}
	// DNS comes to name it: DNS's while it does, the API's again after.
	s.Discovered("web", dnsBackends("10.0.0.5:80"))
	if got := addrsOf(s.Pools(cfg).Pools["web"]); got[2] != "10.0.0.5:80/dns" || len(got) != 3 {
		t.Fatalf("backends %v, want 10.0.0.5 as DNS's", got)
	}
	s.Discovered("web", nil)
	if got := addrsOf(s.Pools(cfg).Pools["web"]); got[2] != "10.0.0.5:80/api" {
		t.Fatalf("backends %v, want 10.0.0.5 the API's again", got)
	}
	// The file names it: the API forgets it.
	next := fileConfig(t, "[[pool.web.backend]]\naddr = \"10.0.0.5:80\"\n")
	s.Settle(next)
	if got := s.AddedBackends(); len(got) != 0 {
		t.Fatalf("API additions %v after the file named the address", got)
	}
	// A pool the file dropped loses its additions and discovered set.
	s.Discovered("web", dnsBackends("10.0.0.6:80"))
	s.Add(next.Pools["web"], Added{Addr: "10.0.0.7:80", Weight: 1})
	delete(next.Pools, "web")
	s.Settle(next)
	if len(s.AddedBackends()) != 0 || len(s.DiscoveredBackends()) != 0 {
		t.Fatalf("a dropped pool kept %v / %v", s.AddedBackends(), s.DiscoveredBackends())
	}
}

func TestRestoreAfterAnUpgrade(t *testing.T) {
	cfg := fileConfig(t, "")
	s := New()
	s.Restore(map[string][]Added{"web": {{Addr: "10.0.0.5:80", Weight: 2, ID: "five"}}})
	b := s.Pools(cfg).Pools["web"].Backends[2]
	if b.Addr != "10.0.0.5:80" || b.Weight != 2 || b.ID != "five" || b.Source != config.BackendFromAPI {
		t.Fatalf("restored backend %+v", b)
	}
}

func TestSetAddedReplacesThePoolsAdditions(t *testing.T) {
	cfg := fileConfig(t, "")
	s := New()
	if _, err := s.Add(cfg.Pools["web"], Added{Addr: "10.0.0.5:80", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	v := s.Version()
	if !s.SetAdded("web", []Added{{Addr: "[::ffff:10.0.0.6]:80", Weight: 2}, {Addr: "nonsense", Weight: 1}}) || s.Version() == v {
		t.Fatal("another instance's record changed nothing")
	}
	if got := s.AddedBackends()["web"]; len(got) != 1 || got[0] != (Added{Addr: "10.0.0.6:80", Weight: 2}) {
		t.Fatalf("additions %+v, want the record's one, normalised, without the unparsable", got)
	}
	if s.SetAdded("web", []Added{{Addr: "10.0.0.6:80", Weight: 2}}) {
		t.Fatal("the same record again reported a change")
	}
	if !s.SetAdded("web", nil) || len(s.AddedBackends()) != 0 {
		t.Fatal("an empty record left additions")
	}
}

func TestSettleUndone(t *testing.T) {
	cfg := fileConfig(t, "")
	s := New()
	if _, err := s.Add(cfg.Pools["web"], Added{Addr: "10.0.0.5:80", Weight: 1}); err != nil {
		t.Fatal(err)
	}
	s.Discovered("web", dnsBackends("10.0.0.6:80"))
	next := fileConfig(t, "[[pool.web.backend]]\naddr = \"10.0.0.5:80\"\n")
	delete(next.Pools, "web")
	undo := s.Settle(next)
	if len(s.AddedBackends())+len(s.DiscoveredBackends()) != 0 {
		t.Fatal("Settle kept what a file without the pool makes moot")
	}
	undo() // the file could not be served: nothing is forgotten
	if len(s.AddedBackends()["web"]) != 1 || len(s.DiscoveredBackends()["web"]) != 1 {
		t.Fatalf("after the undo: %v, %v", s.AddedBackends(), s.DiscoveredBackends())
	}
}

func TestIdentityClashesAcrossSourcesLeaveTheLaterOut(t *testing.T) {
	cfg := fileConfig(t, "")
	s := New()
	// The API's backend takes as its identity an address DNS names later.
	if _, err := s.Add(cfg.Pools["web"], Added{Addr: "10.0.0.5:80", Weight: 1, ID: "10.0.0.6:80"}); err != nil {
		t.Fatal(err)
	}
	s.Discovered("web", dnsBackends("10.0.0.6:80"))
	got := addrsOf(s.Pools(cfg).Pools["web"])
	want := []string{"10.0.0.1:80/file", "10.0.0.2:80/file", "10.0.0.6:80/dns"}
	if !slices.Equal(got, want) {
		t.Fatalf("backends %v, want %v: the API's backend with DNS's identity left out", got, want)
	}
	// A record from elsewhere with a weight out of range is left out too.
	s.SetAdded("web", []Added{{Addr: "10.0.0.8:80", Weight: 100000}})
	if n := len(s.Pools(cfg).Pools["web"].Backends); n != 3 {
		t.Fatalf("%d backends: an out-of-range weight got in", n)
	}
	if _, err := s.Add(cfg.Pools["web"], Added{Addr: "10.0.0.9:80", Weight: 300}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("add with weight 300: %v", err)
	}
}
