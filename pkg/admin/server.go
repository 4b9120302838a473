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

	"github.com/l4lb/l4lb/pkg/config"
)

// Server is the admin HTTP endpoint.
type Server struct {
	ln   *limitListener
	http *http.Server
	log  *slog.Logger
	done chan struct{}
}

// Handler builds the endpoint's routes: /metrics (on a registry of its
// own, with process and Go runtime metrics), /api/v1 and the status page
// on / (status.go). token, when not
// "", is required by every route that acts (POST).
func Handler(src Sources, token string, log *slog.Logger) http.Handler {
	return handler(src, token, nil, log)
}

// handler is Handler with the connection cap's counters in /metrics.
func handler(src Sources, token string, conns *limitListener, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{src: src, conns: conns},
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())
	reg.MustRegister(src.Collectors...)
	// The API and the profiles act or reveal, so a browser page must not
	// reach them; /metrics is read-only and scraped by host name.
	guarded := http.NewServeMux()
	a := &api{pools: src.pools, config: src.Config, membership: src.Membership, fleet: src.FleetRuntime, discovery: src.Discovery, log: log}
	if src.Server != nil {
		a.listeners = src.Server.ListenerPools
	}
	a.routes(guarded)
	// Exactly "/": other unknown paths stay 404.
	guarded.HandleFunc("GET /{$}", statusPage)
	guarded.HandleFunc("/debug/pprof/", pprof.Index)
	guarded.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	guarded.HandleFunc("/debug/pprof/profile", pprof.Profile)
	guarded.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	guarded.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}}))
	mux.Handle("/", notFromBrowser(requireToken(token, gzipAnswers(guarded))))
	return mux
}

// timeouts bound how long a connection holds one of the capped slots.
type timeouts struct {
	// readHeader also closes a connection that never sends a request.
	readHeader, read, write, idle time.Duration
}

// defaultTimeouts: a request's headers come within seconds; a
// keep-alive connection (a scraper's) idles at most 30s, so even with
// every slot taken, idle holders give way within half a minute.
var defaultTimeouts = timeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 30 * time.Second}

// Start reads c's token file, binds c.Listen now (so a bad token file or a
// busy port fails start-up) and serves src in the background, at most
// c.MaxConnections connections at once.
func Start(c config.Admin, src Sources, log *slog.Logger) (*Server, error) {
	return start(c, src, log, defaultTimeouts)
}

func start(c config.Admin, src Sources, log *slog.Logger, to timeouts) (*Server, error) {
	return startOn(nil, c, src, log, to)
}

// startOn is start on ln, a socket already bound to c.Listen (inherit.go);
// nil: bind c.Listen.
func startOn(ln net.Listener, c config.Admin, src Sources, log *slog.Logger, to timeouts) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	token, err := ReadToken(c.TokenFile)
	if err != nil {
		return nil, err
	}
	if c.MaxConnections < 1 {
		return nil, fmt.Errorf("admin endpoint: max_connections %d: need at least 1", c.MaxConnections)
	}
	if ln == nil {
		if ln, err = net.Listen(bindAddr(c.Listen)); err != nil {
			return nil, fmt.Errorf("admin endpoint: %w", err)
		}
	}
	s := &Server{
		ln:   newLimitListener(ln, c.MaxConnections, log),
		log:  log,
		done: make(chan struct{}),
	}
	s.http = &http.Server{
		Handler:           handler(src, token, s.ln, log),
		ReadHeaderTimeout: to.readHeader,
		ReadTimeout:       to.read,
		WriteTimeout:      to.write,
		IdleTimeout:       to.idle,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin endpoint stopped", "error", err)
		}
	}()
	log.Info("admin endpoint started", "addr", ln.Addr().String(), "max_connections", c.MaxConnections,
		"token", token != "")
	warnIfExposed(log, ln.Addr(), token)
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
