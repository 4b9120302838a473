package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// report is everything the renderers need.
type report struct {
	meta    []string // one line each: machine, method, systems, skips
	results []*ScenarioResult
}

func (h *harness) meta() []string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	user := "the harness's own user"
	if h.opts.user != "" {
		user = h.opts.user
	}
	m := []string{
		fmt.Sprintf("date %s, kernel %s, %d CPUs, RLIMIT_NOFILE %d", time.Now().UTC().Format(time.RFC3339),
			unix.ByteSliceToString(u.Release[:]), h.ncpu, h.limit),
		fmt.Sprintf("profile: %d rounds, %v bulk/conn runs, %d ping round trips, idle N cap %d (quick=%v)",
			h.opts.rounds, h.opts.runTime, h.opts.pingCount, h.opts.idleCap, h.opts.quick),
		"order in a round: " + map[bool]string{false: "the systems' order below, every round", true: "rotated, each round starting one system later (-rotate)"}[h.opts.rotate],
		"CPU placement: " + h.layout.String(),
		fmt.Sprintf("proxy threads: %d (HAProxy nbthread, nginx worker_processes, GOMAXPROCS and l4lb event_loops; "+
			"l4lb raises its GOMAXPROCS to event_loops+1, a P for health checks and admin beside the loops, on the same pinned CPUs)", h.threads),
		"proxies run as " + user,
	}
	for _, s := range h.systems {
		m = append(m, fmt.Sprintf("%s: %s", s.spec.name, s.spec.about))
	}
	m = append(m, h.skipped...)
	return m
}

// formatNum prints about three significant figures; NaN is "-".
func formatNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}
