package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/handoff"
	"github.com/l4lb/l4lb/pkg/sdnotify"
	"github.com/l4lb/l4lb/pkg/siginbox"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "-config FILE [-pidfile FILE] [-upgrade-timeout D]", "Run the load balancer until SIGTERM or SIGINT; SIGHUP reloads FILE in place.", stderr)
	path := fs.String("config", "", "the configuration `FILE`")
	fs.StringVar(&runUpgrade.pidfile, "pidfile", "", "write the pid here (l4lb upgrade -pidfile finds the process by it)")
	fs.DurationVar(&runUpgrade.timeout, "upgrade-timeout", handoff.DefaultTimeout, "how long an upgrade waits for the new process to serve")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
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
	log, closeLog := newLogger(cfg.Log, stderr)
	defer closeLog()
	runUpgrade.inherited = handoff.Take(log)
	return serveUntilSignal(cfg, *path, log, nil)
}

// serveUntilSignal runs cfg (read from path) until SIGTERM or SIGINT, then
// drains for up to shutdown_timeout (a second signal cuts the drain short)
// and returns the exit code. SIGHUP reloads path. ready, if set, is called
// once l4lb accepts connections.
func serveUntilSignal(cfg *config.Config, path string, log *slog.Logger, ready func(*instance)) int {
	// The signals that came since run subscribed wait in the channel: each
	// acts once serving (a SIGHUP reloads, as the file read at start may
	// be older than it).
	sigs := startSignals
	if sigs == nil {
		var stop func()
		sigs, stop = subscribeSignals()
		defer stop()
	}

	up, inh := runUpgrade.take(log)
	defer up.Exiting()
	in, err := startInherited(cfg, log, inh)
	if err != nil {
		log.Error("cannot start", "error", err)
		return 1
	}
	in.useFile(path)
	for _, w := range cfg.Advice() {
		log.Warn("configuration: " + w.Error())
	}
	up.Started(inh)
	adopting := inh.AdoptFlows(in.server, log)
	in.serving()
	if err := sdnotify.Ready(); err != nil {
		log.Warn("cannot notify systemd", "error", err)
	}
	// STATUS= and the watchdog, until the loops are gone (after the drain).
	notifier := sdnotify.StartNotifier(in, log)
	defer notifier.Stop()
	if ready != nil {
		ready(in)
	}

	for sig := range sigs {
		if sig == syscall.SIGHUP {
			in.reload() // logs what it did, or every error
			continue
		}
		handed := false
		if sig == syscall.SIGUSR2 {
			stop := adoptionOver(adopting, sigs, log)
			if stop == nil {
				handed, stop = in.upgrade(up, sigs, notifier.Stop)
				if !handed && stop == nil {
					continue
				}
			}
			sig = stop
		}
		timeout := in.shutdownTimeout()
		if handed {
			timeout = in.upgradeDrainTimeout()
			log.Info("handed over: passing the established connections to the new process", "open", in.server.Active())
		} else {
			log.Info("shutting down: draining open connections", "signal", sig.String(),
				"open", in.server.Active(), "shutdown_timeout", timeout.String())
			sdnotify.Stopping()
			notifier.Draining()
		}
		// The drain ends at its timeout or at a second signal; the cause
		// tells the two apart, so the log can say which it was.
		cut, drained := siginbox.UntilStop(context.Background(), sigs, func(s os.Signal) error {
			return &secondSignal{sig: s, open: in.server.Active()}
		})
		start := time.Now()
		reporting := false // to the new process, what this one holds
		if handed {
			// Before the drain closes the listeners (UDP sessions close
			// with them), and before upgrade_drain_timeout starts: it is
			// for what stays here, not for the hand-over.
			res := up.HandOverFlows(cut, in.server)
			handoff.LogFlows(log, res, in.server.Active(), timeout)
			reporting = res.Reporting // an older new process counts nothing through this one
		}
		ctx, cancel := drainContext(cut, timeout, handed)
		err := in.shutdown(ctx)
		waitCut := false // a second signal ended the wait, not the drain
		if held := in.server.HeldByOldProcess(); reporting && err == nil && held > 0 {
			// Two upgrades in a row: the new process counts the
			// connections the one before this still holds through this
			// one's reports, which end when this one exits.
			log.Info("upgrade: exiting once the previous process's connections are closed: the new process counts them through this one",
				"still_open_there", held)
			if werr := in.server.AwaitOldProcess(ctx); werr != nil {
				waitCut = true
				log.Warn("upgrade: exiting before the previous process's connections are closed; the new process no longer counts them",
					"still_open_there", in.server.HeldByOldProcess(), "reason", werr)
			}
		}
		drained()
		cancel()
		var second *secondSignal
		switch {
		case errors.As(context.Cause(ctx), &second) && waitCut:
			log.Warn("second signal: stopped waiting for the previous process's connections (this one's had all ended)",
				"signal", second.sig.String())
		case errors.As(context.Cause(ctx), &second):
			cutConns := second.open
			if err == nil { // they all ended before the cut
				cutConns = 0
			}
			log.Warn("second signal: cut the open connections at once instead of draining them",
				"signal", second.sig.String(), "connections", cutConns)
		case err != nil:
			log.Warn("drain incomplete", "error", err)
		}
		log.Info("stopped", "drain", time.Since(start).Round(time.Millisecond).String())
		return 0
	}
	return 0
}

// adoptionOver waits, before an upgrade, until the connections still
// coming from the previous process are here: the next process must find
// every one of them, and one still on its way would stay behind. A stop
// signal meanwhile is returned, to be acted on instead of the upgrade;
// other signals are logged and ignored, as during an upgrade.
func adoptionOver(adopting <-chan struct{}, sigs <-chan os.Signal, log *slog.Logger) (stop os.Signal) {
	select {
	case <-adopting:
		return nil
	default:
	}
	log.Info("upgrade waits for the connections still coming from the previous process")
	for {
		select {
		case <-adopting:
			return nil
		case s := <-sigs:
			if s == syscall.SIGTERM || s == syscall.SIGINT {
				return s
			}
			log.Warn("signal ignored while connections still come from the previous process", "signal", s.String())
		}
	}
}

// drainContext bounds a drain: by timeout (shutdown_timeout), or after a
// hand-over by upgrade_drain_timeout, whose 0 waits until the connections
// close.
func drainContext(parent context.Context, timeout time.Duration, upgrade bool) (context.Context, context.CancelFunc) {
	if upgrade && timeout <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, timeout)
}

// secondSignal is why a drain was cut short: a second SIGTERM or SIGINT.
type secondSignal struct {
	sig  os.Signal
	open int64 // connections open when it came: the ones it cut
}

func (s *secondSignal) Error() string {
	return fmt.Sprintf("second signal %s: %d open connections cut", s.sig, s.open)
}
