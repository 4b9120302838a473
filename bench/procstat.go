package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux the harness targets.
const clockTicks = 100

// procTree returns root and all its descendants (nginx workers are the
// master's children).
func procTree(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{root}
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

type procStat struct {
	ppid         int
	utime, stime uint64
}

// readStat parses /proc/PID/stat after the command name, which may hold
// spaces and parentheses.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b), nil
}

func parseStat(b []byte) procStat {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	stt, _ := strconv.ParseUint(f[12], 10, 64)
	return procStat{ppid: ppid, utime: ut, stime: stt}
}

// cpuSeconds sums user+system time over pids.
func cpuSeconds(pids []int) float64 {
	var t uint64
	for _, p := range pids {
		if st, err := readStat(p); err == nil {
			t += st.utime + st.stime
		}
	}
	return float64(t) / clockTicks
}

// cpuByPid is each process's CPU time so far, in ticks.
func cpuByPid(pids []int) map[int]uint64 {
	m := make(map[int]uint64, len(pids))
	for _, p := range pids {
		if st, err := readStat(p); err == nil {
			m[p] = st.utime + st.stime
		}
	}
	return m
}

// cpuSince is the CPU seconds the processes pids used since before (a
// cpuByPid): a process started since counts from 0; one that exited since
// is not counted (its last ticks are gone with it), so a set of processes
// that changes (an upgrade's old ones exiting) never adds up to less than
// nothing.
func cpuSince(before map[int]uint64, pids []int) float64 {
	var t uint64
	for p, now := range cpuByPid(pids) {
		if was := before[p]; now > was {
			t += now - was
		}
	}
	return float64(t) / clockTicks
}

// fieldKB reads "Key:   123 kB" from a /proc file.
func fieldKB(path, key string) (float64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				v, err := strconv.ParseFloat(fs[0], 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}

// treeMemKB sums VmRSS and Pss over pids.
func treeMemKB(pids []int) (rss, pss float64) {
	for _, p := range pids {
		dir := "/proc/" + strconv.Itoa(p)
		if v, ok := fieldKB(dir+"/status", "VmRSS"); ok {
			rss += v
		}
		if v, ok := fieldKB(dir+"/smaps_rollup", "Pss"); ok {
			pss += v
		}
	}
	return rss, pss
}

// treeFds counts open descriptors over pids.
func treeFds(pids []int) int {
	n := 0
	for _, p := range pids {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(p) + "/fd")
		if err == nil {
			n += len(ents)
		}
	}
	return n
}

// slabKB is the system-wide kernel slab memory in use, where socket, epoll
// and pipe memory shows: the objects in use from /proc/slabinfo (root
// only), else meminfo's Slab. Slab counts whole slab pages, which
// depend on what ran before: a system measured after another has grown
// the socket caches reuses their free objects and looks cheaper. Five
// thousand idle connections through HAProxy and then l4lb, freshly
// started each, measured 17.9 KB each both ways in objects in use.
func slabKB() float64 {
	if b, err := os.ReadFile("/proc/slabinfo"); err == nil {
		if kb, ok := parseSlabinfo(b); ok {
			return kb
		}
	}
	v, _ := fieldKB("/proc/meminfo", "Slab")
	return v
}

// parseSlabinfo sums active_objs × objsize over /proc/slabinfo's caches,
// in KB; ok is false when no cache line could be read.
func parseSlabinfo(b []byte) (kb float64, ok bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		// name <active_objs> <num_objs> <objsize> ...; skip the version
		// and the "# name" header lines.
		if len(f) < 4 || f[0] == "slabinfo" || f[0] == "#" {
			continue
		}
		active, err1 := strconv.ParseFloat(f[1], 64)
		size, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		kb += active * size / 1024
		ok = true
	}
	return kb, ok
}

// stealTicks is the host's steal counter from the cpu line of /proc/stat.
func stealTicks() uint64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	return parseSteal(b)
}

func parseSteal(b []byte) uint64 {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	v, _ := strconv.ParseUint(f[8], 10, 64)
	return v
}

// threadIDs lists /proc/PID/task.
func threadIDs(pid int) []int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// voluntarySwitches sums voluntary_ctxt_switches over every thread of
// pids: how often the proxy went to sleep, each sleep a wake-up that
// whoever sent its next packet paid for.
func voluntarySwitches(pids []int) uint64 {
	var n uint64
	for _, p := range pids {
		dir := "/proc/" + strconv.Itoa(p) + "/task"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, t := range tasks {
			if v, ok := fieldKB(dir+"/"+t.Name()+"/status", "voluntary_ctxt_switches"); ok {
				n += uint64(v)
			}
		}
	}
	return n
}
