package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlagSet returns the flag set of subcommand cmd, whose usage shows
// synopsis (the arguments after "l4lb cmd") and about, then the flags.
// Parse errors go to stderr.
func newFlagSet(cmd, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: l4lb %s %s\n\n%s\n\nflags:\n", cmd, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and says whether the command is done before it
// started, with its exit code: -h or -help print the usage on stdout and
// exit 0 (asking for help is no error, unlike the flag package's default
// "Usage of check:" and exit 2); a bad flag prints the flag package's
// message and the usage on stderr and exits 2.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	usage := fs.Usage
	fs.Usage = func() {} // printed below, on the stream that fits
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return 0, true
	case err != nil:
		fs.Usage()
		return 2, true
	}
	return 0, false
}
