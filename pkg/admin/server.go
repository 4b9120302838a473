package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the admin HTTP endpoint.
type Server struct {
	ln   net.Listener
	http *http.Server
	log  *slog.Logger
	done chan struct{}
}

// Handler builds the endpoint's routes: /metrics (on a registry of its
// own, with process and Go runtime metrics) and /api/v1.
func Handler(src Sources, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{src: src},
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())
	// The API and the profiles act or reveal, so a browser page must not
	// reach them; /metrics is read-only and scraped by host name.
	guarded := http.NewServeMux()
	(&api{pools: src.Pools, log: log}).routes(guarded)
	guarded.HandleFunc("/debug/pprof/", pprof.Index)
	guarded.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	guarded.HandleFunc("/debug/pprof/profile", pprof.Profile)
	guarded.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	guarded.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}}))
	mux.Handle("/", notFromBrowser(guarded))
	return mux
}

// Start binds addr now (so a busy port fails start-up) and serves in the
// background.
func Start(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin endpoint: %w", err)
	}
	s := &Server{
		ln:   ln,
		log:  log,
		done: make(chan struct{}),
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin endpoint stopped", "err", err)
		}
	}()
	log.Info("admin endpoint started", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the endpoint, letting in-flight requests finish briefly.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	<-s.done
	return err
}

// slogPrinter adapts promhttp's error log to slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Error(fmt.Sprint(v...)) }
