package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// sysL4lbBase is l4lb built from another tree (-baseline BIN): its rows
// beside l4lb's are a change's before and after, measured in one run,
// round by round, on the same backends and load.
const sysL4lbBase = "l4lb-base"

// l4lbBaselineSystem runs the binary -baseline names with l4lb's own
// config. Opt-in: -baseline adds it to the run (after l4lb, so their
// rounds alternate), and -systems may name it.
func l4lbBaselineSystem() systemSpec {
	s := l4lbVariant(sysL4lbBase, nil, "", nil)
	s.about = "l4lb built from another tree (-baseline): the before of a change whose after is l4lb"
	s.optIn = true
	s.prepare = func(h *harness, s *system) error {
		_, err := h.baselineBinary()
		return err
	}
	s.start = func(h *harness, s *system) (*child, error) {
		bin, err := h.baselineBinary()
		if err != nil {
			return nil, err
		}
		return startL4lb(h, s, bin, nil, nil)
	}
	return s
}

// baselineBinary copies -baseline's binary into the run directory, where
// an unprivileged -user can run it too.
func (h *harness) baselineBinary() (string, error) {
	h.base.once.Do(func() {
		if h.opts.baseline == "" {
			h.base.err = fmt.Errorf("%s: no -baseline binary given", sysL4lbBase)
			return
		}
		b, err := os.ReadFile(h.opts.baseline)
		if err != nil {
			h.base.err = fmt.Errorf("%s: -baseline: %w", sysL4lbBase, err)
			return
		}
		bin := filepath.Join(h.dir, "l4lb-base.bin")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			h.base.err = fmt.Errorf("%s: %w", sysL4lbBase, err)
			return
		}
		h.base.path = bin
	})
	return h.base.path, h.base.err
}
