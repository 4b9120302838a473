package main

import (
	"fmt"
	"io"

	"github.com/l4lb/l4lb/internal/demo"
	"github.com/l4lb/l4lb/pkg/config"
)

// cmdDemo starts an echo backend on every backend address of the
// configuration (the shipped config.toml has three TCP ones and three UDP
// ones), of its pool's protocol, and runs the balancer in front of them
// until Ctrl-C.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "[-config FILE]", "Start local echo backends (TCP and UDP) and the balancer on FILE; Ctrl-C stops it.", stderr)
	path := fs.String("config", "config.toml", "the configuration `FILE`")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		printConfigError(stderr, err)
		fmt.Fprintln(stderr, "l4lb demo: run it from the repository root, or pass -config FILE")
		return 1
	}
	log, closeLog := newLogger(cfg.Log, stderr)
	defer closeLog()

	var backends []*demo.Backend
	defer func() {
		for _, b := range backends {
			b.Close()
		}
	}()
	for _, name := range cfg.PoolNames {
		p := cfg.Pools[name]
		for _, bc := range p.Backends {
			start := demo.StartTCP
			if p.Protocol == config.ProtocolUDP {
				start = demo.StartUDP
			}
			b, err := start(bc.Addr)
			if err != nil {
				fmt.Fprintf(stderr, "l4lb demo: %s echo backend on %s: %v\n", p.Protocol, bc.Addr, err)
				return 1
			}
			backends = append(backends, b)
		}
	}
	return serveUntilSignal(cfg, *path, log, func(in *instance) { demo.Intro(stdout, cfg, backends) })
}
