package admin

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
)

// scaleConfig is pools pools of perPool backends each (health checks off:
// the pools are never run), behind one listener each.
func scaleConfig(pools, perPool int) string {
	var b strings.Builder
	b.WriteString("[admin]\nlisten = \"\"\n")
	for p := range pools {
		fmt.Fprintf(&b, "[[listener]]\nname = \"l%d\"\nbind = \"127.0.0.1:%d\"\npool = \"p%d\"\n", p, 20000+p, p)
	}
	for p := range pools {
		fmt.Fprintf(&b, "[pool.p%d]\nalgorithm = \"maglev\"\n[pool.p%d.health]\nenabled = false\n", p, p)
		for i := range perPool {
			fmt.Fprintf(&b, "[[pool.p%d.backend]]\naddr = \"10.%d.%d.%d:8080\"\n", p, p, i/250, 1+i%250)
		}
	}
	return b.String()
}

// scaleHandler is the admin handler over 5 pools of 200 backends (1,000 in
// all), the size issue 15 asks the endpoints to serve in bounded time.
func scaleHandler(tb testing.TB) http.Handler {
	tb.Helper()
	cfg, err := config.Parse("scale.toml", []byte(scaleConfig(5, 200)))
	if err != nil {
		tb.Fatal(err)
	}
	store := breaker.NewMemoryStore(nil)
	var pools []*pool.Pool
	for _, name := range cfg.PoolNames {
		p, err := pool.New(cfg.Pools[name], pool.Deps{Store: store})
		if err != nil {
			tb.Fatal(err)
		}
		pools = append(pools, p)
	}
	return Handler(Sources{Pools: pools}, "", slog.New(slog.DiscardHandler))
}

func benchGet(b *testing.B, path string) { benchGetAs(b, path, "") }

func benchGetAs(b *testing.B, path, acceptEncoding string) {
	h := scaleHandler(b)
	size := 0
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1"
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", path, rec.Code)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/response")
}

// BenchmarkMetricsScrape1000Backends: GET /metrics with 1,000 backends in 5
// pools.
func BenchmarkMetricsScrape1000Backends(b *testing.B) { benchGet(b, "/metrics") }

// BenchmarkPoolsJSON1000Backends: GET /api/v1/pools with 1,000 backends.
func BenchmarkPoolsJSON1000Backends(b *testing.B) { benchGet(b, "/api/v1/pools") }

// BenchmarkPoolsJSONGzip1000Backends: the same, to a client that accepts
// gzip (the status page's browser).
func BenchmarkPoolsJSONGzip1000Backends(b *testing.B) { benchGetAs(b, "/api/v1/pools", "gzip") }

// BenchmarkConfigParse1000Backends: parsing (every check but the host's) a
// file of 1,000 backends in 5 pools.
func BenchmarkConfigParse1000Backends(b *testing.B) {
	src := []byte(scaleConfig(5, 200))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Parse("scale.toml", src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(src)), "file_bytes")
}

// The endpoints answer at this size, with every backend in them.
func TestScaleEndpointsListEveryBackend(t *testing.T) {
	h := scaleHandler(t)
	for path, want := range map[string]string{"/metrics": `l4lb_backend_up{backend="10.4.0.200:8080",pool="p4"} 1`, "/api/v1/pools": `"addr":"10.4.0.200:8080"`} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "127.0.0.1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, %d bytes, missing %s", path, rec.Code, len(body), want)
		}
	}
}

// BenchmarkStatusPage: GET /, the page itself (its refreshes are GET
// /api/v1/pools: BenchmarkPoolsJSON1000Backends).
func BenchmarkStatusPage(b *testing.B) { benchGet(b, "/") }
