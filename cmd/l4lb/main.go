// Command l4lb is an L4 (TCP) load balancer: raw listeners, a picker per
// pool, connect-failure breakers and active health checks, and a zero-copy
// splice relay.
//
//	l4lb -config FILE          run (same as: l4lb run -config FILE)
//	l4lb check -config FILE    validate the file, print every error
//	l4lb demo [-config FILE]   three local echo backends behind the balancer
//	l4lb version
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return cmdRun(args, stderr)
	case "check":
		return cmdCheck(args, stdout, stderr)
	case "demo":
		return cmdDemo(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "l4lb: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  l4lb -config FILE          run the load balancer (same as: l4lb run -config FILE)
  l4lb check -config FILE    validate FILE; print every error with its line
  l4lb demo [-config FILE]   start three local echo backends and the balancer
                             on FILE (default: config.toml)
  l4lb version               print the version
`)
}
