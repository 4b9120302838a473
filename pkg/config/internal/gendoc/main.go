// Command gendoc writes the configuration reference, docs/configuration.md,
// from the schema of pkg/config: `go generate ./pkg/config` runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/l4lb/l4lb/pkg/config"
)

func main() {
	out := flag.String("o", "", "the `FILE` to write (required)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gendoc: -o FILE is required")
		os.Exit(2)
	}
	if err := os.WriteFile(*out, config.Reference(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
