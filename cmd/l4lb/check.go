package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/l4lb/l4lb/pkg/config"
)

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file to validate")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "l4lb check: -config FILE is required")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	backends := 0
	for _, p := range cfg.Pools {
		backends += len(p.Backends)
	}
	fmt.Fprintf(stdout, "%s: ok (%d listeners, %d pools, %d backends)\n", *path, len(cfg.Listeners), len(cfg.Pools), backends)
	return 0
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
