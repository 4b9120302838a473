package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/sdnotify"
)

func defaultAcceptLoops() int { return runtime.NumCPU() }

func cmdRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "l4lb: -config FILE is required")
		usage(stderr)
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	log := newLogger(cfg.Log, stderr)
	return serveUntilSignal(cfg, log, nil)
}

// serveUntilSignal runs cfg until SIGTERM or SIGINT, then drains for up to
// shutdown_timeout (a second signal cuts the drain short) and returns the
// exit code. ready, if set, is called once l4lb accepts connections.
func serveUntilSignal(cfg *config.Config, log *slog.Logger, ready func(*instance)) int {
	// Subscribe before listening so no early signal takes the default
	// action (which for SIGHUP would kill the process).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	in, err := start(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if err := sdnotify.Ready(); err != nil {
		log.Warn("cannot notify systemd", "err", err)
	}
	if ready != nil {
		ready(in)
	}

	for sig := range sigs {
		if sig == syscall.SIGHUP {
			log.Warn("SIGHUP received: reload not supported yet; the running configuration stays")
			continue
		}
		log.Info("shutting down: draining open connections", "signal", sig.String(),
			"open", in.server.Active(), "shutdown_timeout", cfg.Global.ShutdownTimeout.String())
		sdnotify.Stopping()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Global.ShutdownTimeout)
		drained := make(chan struct{})
		go func() {
			for {
				select {
				case s := <-sigs:
					if s != syscall.SIGHUP {
						log.Warn("second signal: closing open connections now", "signal", s.String())
						cancel()
						return
					}
				case <-drained:
					return
				}
			}
		}()
		start := time.Now()
		err := in.shutdown(ctx)
		close(drained)
		cancel()
		if err != nil {
			log.Warn("drain incomplete", "err", err)
		}
		log.Info("stopped", "drain", time.Since(start).Round(time.Millisecond).String())
		return 0
	}
	return 0
}
