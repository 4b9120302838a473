package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/bench/fleetsim"
)

// The fleet scenario (go run ./bench -scenario fleet -instances N
// -backends M -duration D -json FILE) runs alone: N fleet stores with M
// breakers each against one redis-server of its own, idle then with a few
// trips and recoveries (bench/fleetsim). docs/fleet-redis.md ("Capacity") has
// the figures and the model they check.

// fleetOptions are the command line's.
type fleetOptions struct {
	instances, backends, trips int
	duration, refresh, timeout time.Duration
	jsonPath                   string
}

// fleetDefaultDuration is -duration for the fleet scenario when the flag
// is not given (its default is chaos's).
const fleetDefaultDuration = 30 * time.Second

// fleetMain runs the simulation, prints its figures as JSON and writes
// them to -json.
func fleetMain(o fleetOptions, stdout, log io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := fleetsim.Run(ctx, fleetsim.Options{
		Instances: o.instances, Backends: o.backends, Duration: o.duration, Trips: o.trips,
		Refresh: o.refresh, Timeout: o.timeout,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Logf: func(format string, args ...any) {
			fmt.Fprintf(log, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
		},
	})
	if err != nil {
		fmt.Fprintln(log, "bench:", err)
		return 1
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintln(log, "bench:", err)
		return 1
	}
	out = append(out, '\n')
	_, _ = stdout.Write(out)
	if o.jsonPath != "" {
		if err := os.WriteFile(o.jsonPath, out, 0o644); err != nil {
			fmt.Fprintln(log, "bench:", err)
			return 1
		}
	}
	return 0
}
