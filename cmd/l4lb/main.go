// Command l4lb is an L4 (TCP and UDP) load balancer: raw listeners, a picker per
// pool, connect-failure breakers and active health checks, and a zero-copy
// splice relay.
//
//	l4lb -config FILE          run (same as: l4lb run -config FILE)
//	l4lb check -config FILE    validate the file as run would, print every error
//	l4lb demo [-config FILE]   local TCP and UDP echo backends behind the balancer
//	l4lb upgrade -pidfile FILE the running l4lb replaces itself with the executable on disk
//	l4lb ctl [-admin ADDR] VERB the admin API from the command line (pools, drain, add, ...)
//	l4lb version               (also -version, --version)
//	l4lb help                  (also -h, -help, --help)
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
	if len(args) > 0 {
		// Help and version are asked for the way other tools are asked,
		// as flags too; they are not flags of run.
		switch args[0] {
		case "help", "-h", "-help", "--help":
			usage(stdout)
			return 0
		case "version", "-version", "--version":
			fmt.Fprintln(stdout, versionString())
			return 0
		}
		if !strings.HasPrefix(args[0], "-") {
			cmd, args = args[0], args[1:]
		}
	}
	switch cmd {
	case "run":
		defer subscribeStartSignals()()
		return cmdRun(args, stdout, stderr)
	case "check":
		return cmdCheck(args, stdout, stderr)
	case "demo":
		defer subscribeStartSignals()()
		return cmdDemo(args, stdout, stderr)
	case "upgrade":
		return cmdUpgrade(args, stdout, stderr)
	case "ctl":
		return cmdCtl(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "l4lb: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
}

// usage is the command's help: every subcommand with its flags.
func usage(w io.Writer) {
	fmt.Fprint(w, `l4lb is an L4 (TCP and UDP) load balancer.

usage:
  l4lb [run] -config FILE    run the load balancer until SIGTERM or SIGINT;
                             SIGHUP reloads FILE in place
  l4lb check -config FILE    validate FILE as run would, without serving:
                             print every error with its line; exit 1 on any
  l4lb demo [-config FILE]   start local echo backends (TCP and UDP) and the balancer
                             on FILE (default: config.toml); Ctrl-C stops it
  l4lb upgrade -pidfile FILE the running l4lb (run -pidfile FILE; or -pid PID,
                             or $MAINPID) starts the executable now at its path
                             with its sockets, state and open connections, then exits
                             (SIGUSR2 does the same); waits for the outcome
  l4lb ctl [-admin ADDR] [-config FILE] [-token T] [-json] VERB [ARGS]
                             drive the running l4lb's admin API: pools, pool POOL,
                             disable|enable|probe POOL ADDR, drain POOL ADDR [-timeout D] [-local],
                             weight POOL ADDR N [-local], add POOL ADDR [-weight N] [-id ID],
                             remove POOL ADDR [-timeout D], reload (l4lb ctl -h: each verb);
                             exit 1 when the API refuses
  l4lb version               print the version (also: -version, --version)
  l4lb help                  print this text (also: -h, -help, --help)

flags:
  -config FILE               the TOML configuration; config.toml in the
                             repository is the commented reference of every key
  -pidfile FILE              run: write the pid there (upgrade finds it there)
  -upgrade-timeout D         run: how long an upgrade waits for the new process
                             to serve before killing it (default 1m)
  -admin ADDR                ctl: the admin endpoint (default: -config's [admin] listen)
  -token T                   ctl: the admin token (default: -config's [admin] token_file)
  -json                      ctl: print the API's JSON as it comes
  -h                         after a command: that command's usage

exit status: 0 success, 1 a bad configuration or a failed start,
2 a bad command line.
`)
}
