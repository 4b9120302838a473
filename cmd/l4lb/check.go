package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
)

// cmdCheck validates a configuration file as run would, without serving:
// it parses the file, checks it against this host and builds every pool
// (server.BuildPools, which run calls too). It binds nothing, so it can check the
// next file beside a running l4lb that holds the ports.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", "-config FILE", "Validate FILE as run would, without serving: print every error with its line;\nexit 1 on any error, 0 when the file is good.", stderr)
	path := fs.String("config", "", "the configuration `FILE` to validate")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *path == "" {
		fmt.Fprintln(stderr, "l4lb check: -config FILE is required")
		return 2
	}
	cfg, err := config.Load(*path)
	if err == nil {
		err = checkBuild(cfg)
	}
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%s)\n", *path, summary(cfg))
	for _, w := range cfg.Advice() {
		fmt.Fprintf(stdout, "warning: %v\n", w)
	}
	for _, name := range cfg.PoolNames {
		if d := cfg.Pools[name].Discovery; d != nil {
			fmt.Fprintf(stdout, "pool %q: its backends in DNS (%s) are looked up when l4lb runs; check does not resolve them\n", name, d.DNS+d.SRV)
		}
	}
	return 0
}

// summary is what check says of a good file: how many listeners, pools and
// backends; with UDP listeners, also how many of each protocol and the
// sessions they may hold (an fd each, out of the TCP clients' budget).
func summary(cfg *config.Config) string {
	backends, udpPools := 0, 0
	for _, p := range cfg.Pools {
		backends += len(p.Backends)
		if p.Protocol == config.ProtocolUDP {
			udpPools++
		}
	}
	udpListeners := 0
	for _, l := range cfg.Listeners {
		if l.Protocol == config.ProtocolUDP {
			udpListeners++
		}
	}
	if udpListeners == 0 {
		return fmt.Sprintf("%d listeners, %d pools, %d backends", len(cfg.Listeners), len(cfg.Pools), backends)
	}
	return fmt.Sprintf("%d listeners: %d tcp, %d udp; %d pools: %d tcp, %d udp; %d backends; udp sessions up to %d",
		len(cfg.Listeners), len(cfg.Listeners)-udpListeners, udpListeners,
		len(cfg.Pools), len(cfg.Pools)-udpPools, udpPools, backends, server.UDPSessions(cfg))
}

// checkBuild builds cfg's pools as run would and drops them: they never
// ran, so there is nothing to stop.
func checkBuild(cfg *config.Config) error {
	_, err := server.BuildPools(cfg, pool.Deps{Store: breaker.NewMemoryStore(nil)}, nil, nil)
	return err
}

// printConfigError prints every configuration error, one per line.
func printConfigError(w io.Writer, err error) {
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(w, e.Error())
		}
		fmt.Fprintf(w, "%d error(s)\n", len(errs))
		return
	}
	fmt.Fprintln(w, err)
}
