package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// The access log's interim lines with N long-lived connections held
// (issue 30): l4lb-interim is l4lb-log ([log] access = "json" to a file)
// with access_interval = "1s", so every connection gets an interim line a
// second. The longlived idle window (no message moves) then measures
// what they cost: the two systems' idle CPU differ by the interim lines
// alone, and interim_per_s counts the lines written over that window.
//
//	sudo go run ./bench -scenario longlived -longlived-systems l4lb-log,l4lb-interim

const (
	sysL4lbInterim = "l4lb-interim"
	llInterimEvery = "1s"
	llAccessFile   = "access.log"
)

// llAccessKeys are the [log] keys of an l4lb instance writing its access
// log to llAccessFile in dir, with access_interval = interval ("": off).
func llAccessKeys(dir, interval string) string {
	k := fmt.Sprintf("access = \"json\"\naccess_file = %q\n", filepath.Join(dir, llAccessFile))
	if interval != "" {
		k += fmt.Sprintf("access_interval = %q\n", interval)
	}
	return k
}

// llStartL4lbLogging starts an l4lb instance with its access log on
// (llAccessKeys).
func llStartL4lbLogging(interval string) func(r *llRunner, in *llInstance) (*child, error) {
	return llStartL4lbLog("", func(dir string) string { return llAccessKeys(dir, interval) })
}

// interimLines counts the interim lines of every instance's access log so
// far (0 for a system without one).
func interimLines(insts []*llInstance) int {
	n := 0
	for _, in := range insts {
		data, err := os.ReadFile(filepath.Join(in.dir, llAccessFile))
		if err == nil {
			n += bytes.Count(data, []byte(`"event":"interim"`))
		}
	}
	return n
}

// interimRate is the interim lines written per second over a window that
// began with before lines written, t0.
func interimRate(insts []*llInstance, before int, t0 time.Time) float64 {
	return float64(interimLines(insts)-before) / time.Since(t0).Seconds()
}

// interimNote compares l4lb-interim's idle CPU with l4lb-log's: the cost
// of an interim line, per connection held and per line.
func interimNote(sr *ScenarioResult, n int) (string, bool) {
	on, off := sr.summary(sysL4lbInterim, "idle_cpu_ms_per_s").Median, sr.summary(sysL4lbLog, "idle_cpu_ms_per_s").Median
	lines := sr.summary(sysL4lbInterim, "interim_per_s").Median
	if math.IsNaN(on) || math.IsNaN(off) || n == 0 {
		return "", false
	}
	extra := on - off // ms of CPU per second
	note := fmt.Sprintf("interim lines (%s vs %s, access_interval = %q, N = %d held, idle window): idle CPU %s vs %s ms/s: %.2f µs of CPU per connection per second",
		sysL4lbInterim, sysL4lbLog, llInterimEvery, n, formatNum(on), formatNum(off), extra*1000/float64(n))
	if !math.IsNaN(lines) && lines > 0 {
		note += fmt.Sprintf(", %.2f µs per interim line (%s lines/s written)", extra*1000/lines, formatNum(lines))
	}
	return note + "; /proc ticks are 10 ms, 2 ms/s over the 5 s window", true
}
