package admin

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The JSON API and the status page answer gzip to clients that accept
// it: the pools JSON of 1,000 backends is about 346 KB, which the status
// page fetches every 2 s, and JSON of many alike objects compresses
// about tenfold. /metrics compresses itself (promhttp); the profiles
// are compressed already.

// gzipAnswers compresses h's answers for requests that accept gzip.
func gzipAnswers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/") {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gw := &gzipWriter{ResponseWriter: w}
		defer gw.finish()
		h.ServeHTTP(gw, r)
	})
}

// acceptsGzip reads an Accept-Encoding header: gzip (or *) listed and
// not refused with q=0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		q := 1.0
		if v, ok := strings.CutPrefix(strings.ReplaceAll(strings.ToLower(params), " ", ""), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		return q > 0
	}
	return false
}

// gzipLevel: fastest. The endpoint's CPU matters more than the last
// bytes, and JSON compresses well at any level.
const gzipLevel = gzip.BestSpeed

var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzipLevel)
	return zw
}}

// gzipWriter compresses what the handler writes; the headers say so from
// the first write on.
type gzipWriter struct {
	http.ResponseWriter
	zw      *gzip.Writer
	started bool
}

func (g *gzipWriter) WriteHeader(status int) {
	if !g.started {
		g.started = true
		h := g.Header()
		h.Set("Content-Encoding", "gzip")
		h.Del("Content-Length")
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.started {
		g.WriteHeader(http.StatusOK)
	}
	if g.zw == nil {
		g.zw = gzipWriters.Get().(*gzip.Writer)
		g.zw.Reset(g.ResponseWriter)
	}
	return g.zw.Write(b)
}

// finish ends the compressed stream (an answer with no body has none).
func (g *gzipWriter) finish() {
	if g.zw != nil {
		g.zw.Close()
		gzipWriters.Put(g.zw)
	}
}
