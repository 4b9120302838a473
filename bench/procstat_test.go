package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := "1234 (we) ird (name) S 77 1234 1234 0 -1 4194560 100 0 0 0 250 125 0 0 20 0 3 0 100 0 0\n"
	got := parseStat([]byte(line))
	if got.ppid != 77 || got.utime != 250 || got.stime != 125 {
		t.Fatalf("parseStat = %+v, want ppid 77 utime 250 stime 125", got)
	}
}

func TestParseSteal(t *testing.T) {
	b := []byte("cpu  4320 0 2124 53577 198 0 27 9 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if got := parseSteal(b); got != 9 {
		t.Fatalf("parseSteal = %d, want 9", got)
	}
	if got := parseSteal([]byte("intr 1 2 3\n")); got != 0 {
		t.Fatalf("parseSteal without a cpu line = %d, want 0", got)
	}
}

func TestPlanLayout(t *testing.T) {
	l := planLayout(2, true)
	if !l.pinned || cpuList(l.loadgen) != "0" || cpuList(l.backends) != "0" || cpuList(l.proxy) != "1" {
		t.Errorf("2 CPUs: %+v, want load 0, backends 0, proxy 1", l)
	}
	l = planLayout(8, true)
	if cpuList(l.loadgen) != "0" || cpuList(l.backends) != "1" || cpuList(l.proxy) != "2,3,4,5,6,7" {
		t.Errorf("8 CPUs: %+v", l)
	}
	for _, l := range []cpuLayout{planLayout(1, true), planLayout(4, false)} {
		if l.pinned || len(l.proxy) != len(l.loadgen) {
			t.Errorf("unpinned layout expected, got %+v", l)
		}
	}
}

func TestVoluntarySwitchesCountsSleeps(t *testing.T) {
	// A shell that waits for 20 sleeps in a row goes to sleep at least
	// 20 times itself.
	cmd := exec.Command("sh", "-c", "read _; for i in $(seq 20); do sleep 0.01; done; read _")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	pids := []int{cmd.Process.Pid}
	before := voluntarySwitches(pids)
	fmt.Fprintln(in)
	deadline := time.Now().Add(20 * time.Second)
	for voluntarySwitches(pids)-before < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("voluntary switches went from %d to %d; want 20 more", before, voluntarySwitches(pids))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := voluntarySwitches([]int{-1}); got != 0 {
		t.Fatalf("a missing process counts %d switches, want 0", got)
	}
}

func TestParseSlabinfoCountsObjectsInUse(t *testing.T) {
	b := []byte(`slabinfo - version: 2.1
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>
TCP                   20     64   2048   16    8 : tunables    0    0    0 : slabdata      4      4      0
eventpoll_epi        100    512    128   32    1 : tunables    0    0    0 : slabdata     16     16      0
`)
	kb, ok := parseSlabinfo(b)
	// In use: 20 × 2048 + 100 × 128 = 53,760 B; not the 147,456 B of
	// whole slabs (num_objs).
	if !ok || kb != 52.5 {
		t.Fatalf("parseSlabinfo = %v, %v; want 52.5 KB of objects in use", kb, ok)
	}
	if _, ok := parseSlabinfo([]byte("slabinfo - version: 2.1\n")); ok {
		t.Fatal("a slabinfo with no cache line parsed as ok")
	}
}

func TestParseCPUTimes(t *testing.T) {
	b := []byte("cpu  30 0 30 300 0 0 0 5 0 0\n" +
		"cpu0 10 1 20 100 4 2 3 7 0 0\n" +
		"cpu1 20 0 10 200 0 0 0 0 0 0\n" +
		"cpu10 1000 0 0 0 0 0 0 0 0 0\n")
	got := parseCPUTimes(b, []int{0})
	// busy: user+nice+system+irq+softirq; idle and iowait are not busy;
	// steal is the host's, not this CPU's time; cpu10 is not cpu1.
	if got != (cpuTimes{busy: 36, total: 140}) {
		t.Fatalf("cpu0 = %+v, want busy 36 total 140", got)
	}
	if got := parseCPUTimes(b, []int{0, 1}); got != (cpuTimes{busy: 66, total: 370}) {
		t.Fatalf("cpu0+1 = %+v, want busy 66 total 370", got)
	}
	share, ok := busyShare(cpuTimes{busy: 10, total: 100}, cpuTimes{busy: 60, total: 200})
	if !ok || share != 50 {
		t.Fatalf("busyShare = %v %v, want 50 true", share, ok)
	}
	if _, ok := busyShare(cpuTimes{total: 5}, cpuTimes{total: 5}); ok {
		t.Fatal("busyShare with no tick passed must report no figure")
	}
}

// cpuSince counts a process that started since from 0 and never goes
// below 0 when a process counted before has exited.
func TestCPUSinceOverAChangingSet(t *testing.T) {
	self := os.Getpid()
	// At least a tick of CPU of its own (bounded).
	for end := time.Now().Add(5 * time.Second); cpuByPid([]int{self})[self] == 0 && time.Now().Before(end); {
	}
	before := map[int]uint64{self: 0, 1 << 30: 1 << 40} // the second: exited since
	if got := cpuSince(before, []int{self}); got <= 0 {
		t.Fatalf("cpuSince = %v, want this process's CPU so far (> 0)", got)
	}
	if got := cpuSince(map[int]uint64{self: 1 << 50}, []int{self}); got != 0 {
		t.Fatalf("cpuSince with a later reading before = %v, want 0", got)
	}
}
