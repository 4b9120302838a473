package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// handoverMsg is the old l4lb process's log line once it has passed its
// established connections to the new one (issue 27's spec; text logger:
// msg="..." relays=N sessions=M took=D).
const handoverMsg = `msg="upgrade: handed over established connections"`

// parseHandover finds handoverMsg in an l4lb log and returns the relays
// it handed over and how long that took; ok is false when the log has no
// such line (a build that drains instead).
func parseHandover(log string) (relays int, took time.Duration, ok bool) {
	for line := range strings.SplitSeq(log, "\n") {
		if !strings.Contains(line, handoverMsg) {
			continue
		}
		for _, f := range strings.Fields(line) {
			k, v, found := strings.Cut(f, "=")
			if !found {
				continue
			}
			switch k {
			case "relays":
				relays, _ = strconv.Atoi(v)
			case "took":
				took, _ = time.ParseDuration(strings.Trim(v, `"`))
			}
		}
		return relays, took, true
	}
	return 0, 0, false
}

// l4lbHandover sums the relays handed over by every instance's old
// process and takes the longest hand-over; ok when every instance logged
// one.
func l4lbHandover(insts []*llInstance) (relays int, took time.Duration, ok bool) {
	ok = len(insts) > 0
	for _, in := range insts {
		b, err := os.ReadFile(filepath.Join(in.dir, "l4lb.log"))
		if err != nil {
			return 0, 0, false
		}
		r, t, found := parseHandover(string(b))
		if !found {
			ok = false
			continue
		}
		relays += r
		took = max(took, t)
	}
	return relays, took, ok
}
