package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// scenario is one kind of load. The runner alternates systems round by
// round (A B C D A B C D ...) so slow drift on the host hits all alike.
type scenario interface {
	name() string
	metrics() []MetricDef
	// rounds for this run (idle runs once: only a fresh process is fresh).
	rounds(o options) int
	applies(s *system) bool
	run(h *harness, s *system) (map[string]float64, error)
	// finish derives figures that need other systems of the same round
	// (e.g. "added over direct").
	finish(sr *ScenarioResult)
}

// scenarioCatalog lists the scenarios in run order: idle first, on fresh
// processes, failover last because it kills and restarts backends.
func scenarioCatalog() []scenario {
	return []scenario{idleScenario{}, bulkScenario{}, connScenario{}, pingScenario{},
		sniScenario{}, redisScenario{}, udpScenario{}, newSyscallsScenario(), failoverScenario{}}
}

// notApplicable is a scenario that some systems cannot run by nature (no
// UDP): such a system gets a row marked n/a with the reason, not a hole.
type notApplicable interface{ notApplicable(s *system) string }

// needsTools is a scenario that runs external tools (redis, syscalls):
// unavailable says why it cannot run here, and it is skipped.
type needsTools interface{ unavailable(h *harness) error }

func runScenario(h *harness, sc scenario) *ScenarioResult {
	sr := &ScenarioResult{Scenario: sc.name(), Metrics: sc.metrics()}
	if nt, ok := sc.(needsTools); ok {
		if err := nt.unavailable(h); err != nil {
			h.logf("bench: scenario %s skipped: %v", sc.name(), err)
			sr.Notes = append(sr.Notes, fmt.Sprintf("skipped: %v", err))
			return sr
		}
	}
	// Rows in system order, n/a ones included.
	for _, s := range h.systems {
		if sc.applies(s) {
			sr.row(s.spec.name, s.spec.kind)
		} else if na, ok := sc.(notApplicable); ok {
			if why := na.notApplicable(s); why != "" {
				sr.markNA(s.spec.name, s.spec.kind, why)
				h.logf("  %-8s %-8s n/a: %s", sc.name(), s.spec.name, why)
			}
		}
	}
	n := sc.rounds(h.opts)
	for round := range n {
		for _, s := range systemsInRound(h.systems, round, h.opts.rotate) {
			if !sc.applies(s) {
				continue
			}
			steal0 := stealTicks()
			vals, err := sc.run(h, s)
			steal := stealTicks() - steal0
			sr.add(s.spec.name, s.spec.kind, vals, steal, err)
			h.logf("  %-8s round %d/%d %-8s %s%s", sc.name(), round+1, n, s.spec.name, brief(sc.metrics(), vals), errNote(err, steal))
			time.Sleep(h.opts.pause)
		}
	}
	sc.finish(sr)
	return sr
}

// systemsInRound is the order systems run in, in round r: the file's, or
// with rotate the file's started r places later. Within a round, a host
// that drifts (a neighbour's load, frequency) favours some positions over
// others; rotating gives every system every position in turn. Samples
// stay paired by round whatever the order.
func systemsInRound(systems []*system, r int, rotate bool) []*system {
	if !rotate || len(systems) == 0 {
		return systems
	}
	k := r % len(systems)
	return append(slices.Clone(systems[k:]), systems[:k]...)
}

func brief(ms []MetricDef, vals map[string]float64) string {
	var parts []string
	for _, m := range ms {
		if v, ok := vals[m.Name]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", m.Name, formatNum(v)))
		}
	}
	return strings.Join(parts, " ")
}

func errNote(err error, steal uint64) string {
	s := ""
	if steal > 0 {
		s += fmt.Sprintf(" [steal %d ticks]", steal)
	}
	if err != nil {
		s += " error: " + err.Error()
	}
	return s
}

// measureCPU runs f and returns the CPU seconds s's proxy tree used.
func measureCPU(s *system, f func() error) (float64, error) {
	pids := s.pids()
	before := cpuSeconds(pids)
	err := f()
	// Re-read the tree: a worker may have been forked meanwhile.
	return cpuSeconds(s.pids()) - before, err
}

// isProxy is true for every system except direct.
func isProxy(s *system) bool { return s.spec.start != nil }
