package discovery

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// The three series, as a scrape reads them.
func TestMetricsExposition(t *testing.T) {
	srv := startDNSServer(t, rr("web.test.", 20, "A", "10.0.0.1"), rr("web.test.", 20, "A", "10.0.0.2"))
	h := run(t, spec("web.test", srv))
	h.wait()
	h.mustReport(be("10.0.0.1:9001", "web.test"), be("10.0.0.2:9001", "web.test"))
	srv.setMode(servfail)
	h.step(20 * time.Second)
	reg := prometheus.NewRegistry()
	if err := reg.Register(h.metrics); err != nil {
		t.Fatal(err)
	}
	want := `# HELP l4lb_discovery_backends Backends in the set DNS discovery reported last.
# TYPE l4lb_discovery_backends gauge
l4lb_discovery_backends{pool="web"} 2
# HELP l4lb_discovery_last_success_timestamp_seconds When a DNS discovery lookup last got an answer, with records or without (Unix seconds; 0: never).
# TYPE l4lb_discovery_last_success_timestamp_seconds gauge
l4lb_discovery_last_success_timestamp_seconds{pool="web"} 1.7672256e+09
# HELP l4lb_discovery_lookups_total ` + descHelp(descLookups) + `
# TYPE l4lb_discovery_lookups_total counter
l4lb_discovery_lookups_total{pool="web",result="empty"} 0
l4lb_discovery_lookups_total{pool="web",result="error"} 1
l4lb_discovery_lookups_total{pool="web",result="nxdomain"} 0
l4lb_discovery_lookups_total{pool="web",result="ok"} 1
l4lb_discovery_lookups_total{pool="web",result="timeout"} 0
`
	if got := scrape(t, reg); got != want {
		t.Fatalf("scraped:\n%s\nwant:\n%s", got, want)
	}
	h.metrics.Forget("web")
	if got := scrape(t, reg); got != "" {
		t.Fatalf("scraped after Forget:\n%s", got)
	}
}

// scrape is reg's metrics in the text format.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// descHelp is a Desc's help text, read back from its String.
func descHelp(d *prometheus.Desc) string {
	s := d.String()
	i := strings.Index(s, `help: "`) + len(`help: "`)
	return s[i : i+strings.Index(s[i:], `"`)]
}

func TestNewMetricsRegisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("a second Metrics registered on the same registry")
	}
}
