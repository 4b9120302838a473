package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is how long a set of CPUs was busy and how long they ran at
// all, in clock ticks from /proc/stat.
type cpuTimes struct{ busy, total uint64 }

// readCPUTimes sums the /proc/stat lines of cpus; zero when unreadable.
func readCPUTimes(cpus []int) cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	return parseCPUTimes(b, cpus)
}

// parseCPUTimes reads the "cpuN user nice system idle iowait irq softirq
// steal ..." lines of cpus. Idle and iowait are not busy; steal is not
// counted at all (the CPU was not ours). guest time is already inside
// user, so the fields after steal are left out.
func parseCPUTimes(b []byte, cpus []int) cpuTimes {
	want := make(map[string]bool, len(cpus))
	for _, c := range cpus {
		want["cpu"+strconv.Itoa(c)] = true
	}
	var t cpuTimes
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) < 8 || !want[f[0]] {
			continue
		}
		var v [7]uint64
		for i := range v {
			v[i], _ = strconv.ParseUint(f[i+1], 10, 64)
		}
		idle := v[3] + v[4]
		all := v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6]
		t.busy += all - idle
		t.total += all
	}
	return t
}

// busyShare is the percentage of the time between a and b that the CPUs
// were busy; false when no tick passed (or /proc/stat was unreadable).
func busyShare(a, b cpuTimes) (float64, bool) {
	if b.total <= a.total {
		return 0, false
	}
	return 100 * float64(b.busy-a.busy) / float64(b.total-a.total), true
}
