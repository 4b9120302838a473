package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// cpuLayout says where each party runs, so the load generator and the proxy
// do not fight for one core where the machine has two or more.
type cpuLayout struct {
	loadgen, backends, proxy []int
	pinned                   bool
}

// planLayout: 1 CPU: nothing pinned; 2-3 CPUs: load generator and backends
// on CPU 0, proxy on the rest; 4+: load generator 0, backends 1, proxy rest.
func planLayout(ncpu int, pin bool) cpuLayout {
	all := make([]int, ncpu)
	for i := range all {
		all[i] = i
	}
	switch {
	case !pin || ncpu < 2:
		return cpuLayout{loadgen: all, backends: all, proxy: all}
	case ncpu < 4:
		return cpuLayout{loadgen: []int{0}, backends: []int{0}, proxy: all[1:], pinned: true}
	default:
		return cpuLayout{loadgen: []int{0}, backends: []int{1}, proxy: all[2:], pinned: true}
	}
}

func (l cpuLayout) String() string {
	if !l.pinned {
		return "not pinned (every process may use every CPU)"
	}
	return fmt.Sprintf("load generator on CPU %s, backends on CPU %s, proxy on CPU %s; "+
		"ping pins client, proxy and backend together on CPU 0",
		cpuList(l.loadgen), cpuList(l.backends), cpuList(l.proxy))
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	return strings.Join(s, ",")
}

func cpuSet(cpus []int) *unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return &set
}

// pinProcs sets the affinity of every thread of every pid.
func pinProcs(pids []int, cpus []int) error {
	set := cpuSet(cpus)
	var firstErr error
	for _, p := range pids {
		for _, t := range threadIDs(p) {
			if err := unix.SchedSetaffinity(t, set); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("pin tid %d: %w", t, err)
			}
		}
	}
	return firstErr
}

// pinSelf pins every thread of the harness (new threads inherit it).
func pinSelf(cpus []int) error { return pinProcs([]int{os.Getpid()}, cpus) }

// pinCurrentThread locks the calling goroutine to its OS thread and pins
// that thread; the returned func restores the affinity and unlocks. The
// thread must survive: a child's Pdeathsig fires when the thread that
// forked it exits, and any runtime thread may have forked one.
func pinCurrentThread(cpus, restore []int) (func(), error) {
	runtime.LockOSThread()
	if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		_ = unix.SchedSetaffinity(0, cpuSet(restore))
		runtime.UnlockOSThread()
	}, nil
}
