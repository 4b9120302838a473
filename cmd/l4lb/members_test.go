package main

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/discovery"
)

// A set DNS reports while an upgrade's new process takes over (its
// actions refused until it serves) is not served then, and is served
// once the process serves: the watcher reports a set once, so a refused
// change is tried again rather than dropped.
func TestDiscoveredSetRefusedDuringTakeOverIsServedAfter(t *testing.T) {
	dns := testnet.StartZoneDNS(t, "127.0.59.1", "10.59.0.1", "disc.test", "127.0.0.2 web.disc.test\n")
	path, _, _ := e2eutil.WriteConfig(t, "", nil, "")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[pool.p.health]\nenabled = false\n[pool.p.discovery]\ndns = \"web.disc.test:9\"\nresolvers = [%q]\nfamily = \"ipv4\"\nmin_refresh = \"100ms\"\nmax_refresh = \"1s\"\n", dns.Addr)
	f.Close()
	in := startTakingOver(t, path)
	served := func() []string {
		var out []string
		for _, lp := range in.livePools() {
			for _, b := range lp.Backends() {
				out = append(out, b.Addr)
			}
		}
		return out
	}
	testnet.Eventually(t, "the first answer served", func() bool { return slices.Equal(served(), []string{"127.0.0.2:9"}) })

	dns.WriteHosts(t, "127.0.0.3 web.disc.test\n")
	dns.Reload(t)
	testnet.Eventually(t, "the watcher to find the new set", func() bool {
		bs := in.members.DiscoveredBackends()["p"]
		return len(bs) == 1 && bs[0].Addr == "127.0.0.3:9"
	})
	if got := served(); !slices.Equal(got, []string{"127.0.0.2:9"}) {
		t.Fatalf("taking over, the pool serves %v; want the change refused until it serves", got)
	}
	in.serving()
	testnet.Eventually(t, "the new set served once the process serves", func() bool { return slices.Equal(served(), []string{"127.0.0.3:9"}) })
}

func TestDiscoveredBackendsTakeTheBlocksSettings(t *testing.T) {
	set := discovery.Set{Backends: []discovery.Backend{
		{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Weight: 7},
		{Addr: netip.MustParseAddrPort("[::1]:80"), Weight: 2},
	}}
	d := config.DefaultDiscovery()
	d.DNS, d.Weight, d.MaxConnections, d.Backup, d.Line = "web.test:80", 5, 9, true, 12
	got := discoveredBackends(d, set)
	if len(got) != 2 {
		t.Fatalf("%d backends", len(got))
	}
	for _, b := range got {
		if b.Weight != 5 || b.MaxConnections != 9 || !b.Backup || b.Line != 12 {
			t.Fatalf("dns backend %+v: want the block's weight 5, cap 9, backup, line 12", b)
		}
	}
	if got[1].Addr != "[::1]:80" {
		t.Fatalf("address %q, want [::1]:80", got[1].Addr)
	}
	d.DNS, d.SRV = "", "_web._tcp.test"
	if got := discoveredBackends(d, set); got[0].Weight != 7 || got[1].Weight != 2 {
		t.Fatalf("srv backends %+v: want the records' weights", got)
	}
}

func TestSameSpecIgnoresTheLineOnly(t *testing.T) {
	a := config.DefaultDiscovery()
	a.DNS, a.Resolvers, a.Line = "web.test:80", []string{"127.0.0.1:53"}, 3
	b := a
	b.Resolvers = []string{"127.0.0.1:53"}
	b.Line = 9
	if !sameSpec(a, b) {
		t.Fatal("a block moved to another line counted as changed")
	}
	b.Resolvers = []string{"127.0.0.2:53"}
	if sameSpec(a, b) {
		t.Fatal("another resolver counted as the same block")
	}
}

// A reload that changes a pool's [pool.X.discovery] keeps its lookup
// counters: the new watcher counts on from where the old one stopped, and
// no counter goes back to 0 (which Prometheus reads as a reset).
func TestDiscoveryChangeKeepsItsCounters(t *testing.T) {
	dns := testnet.StartZoneDNS(t, "127.0.59.1", "10.59.0.1", "disc.test", "127.0.0.2 web.disc.test\n")
	base, _, _ := e2eutil.WriteConfig(t, "", nil, "")
	head, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	text := func(maxRefresh string) string {
		return string(head) + fmt.Sprintf("[pool.p.health]\nenabled = false\n[pool.p.discovery]\ndns = \"web.disc.test:9\"\nresolvers = [%q]\nfamily = \"ipv4\"\nmin_refresh = \"100ms\"\nmax_refresh = %q\n", dns.Addr, maxRefresh)
	}
	in, path := startFile(t, text("1s"))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(in.discovery.metrics)
	ok := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "l4lb_discovery_lookups_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["pool"] == "p" && labels["result"] == "ok" {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	testnet.Eventually(t, "three lookups answered", func() bool { return ok() >= 3 })
	before := ok()
	if err := os.WriteFile(path, []byte(text("2s")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs := in.reload(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if now := ok(); now < before {
		t.Fatalf("lookups answered: %v after the reload, %v before: the counter went back", now, before)
	}
	testnet.Eventually(t, "the new watcher's lookups counted on", func() bool { return ok() > before })
}
