package main

import (
	"fmt"
	"sort"
	"strings"
)

// renderChaos is the text report (Markdown tables).
func renderChaos(rep *chaosReport) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	verdict := "PASSED"
	if !rep.Passed {
		verdict = fmt.Sprintf("FAILED (%d violations)", rep.ViolationCount)
	}
	sp := rep.Spec
	p("## chaos: %s\n\n", verdict)
	p("%s; %.0f s of load (+%.1f s for the last streams to end), seed %d; %d client workers, sizes %s to %s each way "+
		"(log-uniform), %.0f%% half-close, %.0f%% deliberate resets; faults on backends 2 and 3 (backend 1 never), "+
		"each held %v-%v with %v-%v between.\n\n",
		rep.Started, rep.RunSeconds, rep.DrainSeconds, sp.Seed, sp.Workers, sizeStr(sp.MinSize), sizeStr(sp.MaxSize),
		100*sp.HalfClose, 100*sp.ResetShare, sp.HoldMin, sp.HoldMax, sp.GapMin, sp.GapMax)

	if rep.Warmup.Failed > 0 {
		p("**Warm-up: %d of %d small streams through healthy backends, before any fault, broke a rule.**", rep.Warmup.Failed, rep.Warmup.Conns)
		if rep.RunSeconds == 0 {
			p(" The fault run was not started (fail-fast).\n\n")
			violations(p, rep)
			return b.String()
		}
		p("\n\n")
	}
	t := rep.Totals
	p("| connections | attempted | byte-exact | corrupted | truncated | failed | reset by the client (on purpose) |\n")
	p("|---|---:|---:|---:|---:|---:|---:|\n")
	p("| all | %d | %d | %d | %d | %d | %d |\n\n", t.Attempted, t.Exact, t.Corrupted, t.Truncated, t.Failed, t.ClientReset)
	p("- byte-exact: %d, of which %d lived through a fault on their own backend; %d half-closed; %s sent, %s received and verified.\n",
		t.Exact, t.ExactThroughFault, t.HalfClosed, sizeStr(t.BytesSent), sizeStr(t.BytesReceived))
	p("- truncated: %d behind their backend's own FIN (a killed backend whose socket had nothing unread), "+
		"%d behind a FIN the backend did not send, %d with the request cut behind a FIN the client did not send.\n",
		t.TruncBackendFIN, t.TruncFalseFIN, t.TruncRequest)
	p("- failed: %d reset, %d stalled (%v without a byte either way), %d ended before the backend's first byte, %d not accepted by l4lb.\n",
		t.Reset, t.Stalled, sp.Stall, t.NoHello, t.DialFailed)
	p("- connections that broke a rule: %d.\n\n", t.Violating)

	p("### By the fault each connection coincided with\n\n")
	p("The last fault on the connection's own backend that overlapped its life (for a connection that failed before " +
		"its backend's first byte, the last on any backend, preferring those that end streams: kill, reject-all, " +
		"reset-mid, accept-close; \"none\": no fault on its backend while it lived; \"unknown\": reset by the client " +
		"before its backend's first byte, so the backend is not known).\n\n")
	p("| fault | applied | connections | exact | client reset | truncated | reset | stalled | before 1st byte | corrupted | broke a rule |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.ByFault {
		applied := fmt.Sprint(r.Applied)
		if r.Kind == "none" || r.Kind == "unknown" {
			applied = "-"
		}
		p("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", r.Kind, applied, r.Conns, r.Exact, r.ClientReset,
			r.Truncated, r.Reset, r.Stalled, r.NoHello, r.Corrupted, r.Violating)
	}
	k := rep.Kills
	p("\nKills: %d; %d streams cut: %d truncated behind the dead backend's FIN (nothing unread in its socket), "+
		"%d reset after its RST (bytes unread), %d reset after its FIN (the client was still sending: l4lb's write met "+
		"the dead socket's reset), %d before its first byte, %d otherwise.\n\n",
		k.Kills, k.Cut, k.BehindFIN, k.BehindRST, k.ResetAfterFIN, k.NoHello, k.OtherOutcome)

	p("### Per backend\n\n")
	p("| backend | faulted | faults | connections | exact | client reset | truncated | failed | corrupted | data | processes |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.PerBackend {
		p("| %d | %v | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", r.Backend, r.Faulted, r.Faults, r.Conns, r.Exact,
			r.ClientReset, r.Truncated, r.Failed, r.Corrupted, sizeStr(r.Bytes), len(r.PIDs))
	}

	p("\n### Breaker and dials (l4lb /metrics at the end)\n\n")
	p("| backend | trips | probes ok / failed | probe failures (alert) | stale results | client dials ok / failed | health ok / failed | force-tries ok / failed |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var tr breakerRow
	for _, r := range rep.Breaker {
		p("| %d | %.0f | %.0f / %.0f | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f |\n", r.Backend, r.Trips, r.ProbesOK,
			r.ProbesFailed, r.ProbeFailures, r.Stale, r.ClientOK, r.ClientFailed, r.HealthOK, r.HealthFailed, r.ForceOK, r.ForceFailed)
		tr.Trips += r.Trips
		tr.ProbesOK += r.ProbesOK
		tr.ProbesFailed += r.ProbesFailed
		tr.ProbeFailures += r.ProbeFailures
		tr.Stale += r.Stale
		tr.ClientOK += r.ClientOK
		tr.ClientFailed += r.ClientFailed
		tr.HealthOK += r.HealthOK
		tr.HealthFailed += r.HealthFailed
		tr.ForceOK += r.ForceOK
		tr.ForceFailed += r.ForceFailed
	}
	p("| all | %.0f | %.0f / %.0f | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f |\n\n", tr.Trips, tr.ProbesOK,
		tr.ProbesFailed, tr.ProbeFailures, tr.Stale, tr.ClientOK, tr.ClientFailed, tr.HealthOK, tr.HealthFailed, tr.ForceOK, tr.ForceFailed)
	var cr []string
	for _, k := range []string{"ok", "failed", "rejected"} {
		cr = append(cr, fmt.Sprintf("%s %.0f", k, rep.ClientResults[k]))
	}
	p("l4lb's client results: %s.\n\n", strings.Join(cr, ", "))

	p("### l4lb's resources\n\n")
	rs := rep.Resources
	p("Before: after a warm-up of 40 byte-exact connections, 12 samples 250 ms apart (goroutines and fds: the most " +
		"frequent value; the rest: the least). Peak: the most of the samples taken every 0.5 s during the run. After: " +
		"the first sample, once the clients stopped and every backend was usable again, at which everything is back " +
		"(or the last one, when the settle time ran out).\n\n")
	p("| | before | peak | after |\n|---|---:|---:|---:|\n")
	row := func(name string, f func(resSample) string) {
		p("| %s | %s | %s | %s |\n", name, f(rs.Before), f(rs.Peak), f(rs.After))
	}
	row("fds", func(s resSample) string { return fmt.Sprint(s.Fds) })
	row("fds net of pooled idle pipes", func(s resSample) string { return fmt.Sprint(s.netFds()) })
	row("socket fds", func(s resSample) string { return fmt.Sprint(s.SocketFds) })
	row("pipe fds (/proc)", func(s resSample) string { return fmt.Sprint(s.PipeFds) })
	row("splice pipes busy / idle", func(s resSample) string { return fmt.Sprintf("%.0f / %.0f", s.PipesBusy, s.PipesIdle) })
	row("goroutines", func(s resSample) string { return fmt.Sprintf("%.0f", s.Goroutines) })
	row("threads", func(s resSample) string { return fmt.Sprint(s.Threads) })
	row("RSS", func(s resSample) string { return fmt.Sprintf("%.1f MB", s.RSSKB/1024) })
	row("backend connections / clients open", func(s resSample) string {
		return fmt.Sprintf("%.0f / %.0f", s.ConnsActive, s.ClientsOpen)
	})
	p("\nEvery backend usable again %.1f s after the last fault; resources back %.1f s later (bounds: %v, %v; "+
		"fds and goroutines exactly, RSS within %.0f MB).\n\n", rep.ReadmitSeconds, rs.SettleSeconds, sp.Readmit, sp.Settle, sp.RSSTolKB/1024)

	var ev []string
	for k, v := range rep.BackendEvents {
		ev = append(ev, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(ev)
	if len(ev) == 0 {
		ev = []string{"none"}
	}
	p("Backend events: %s. Packets seen on lo (SYN/FIN/RST): %d, lost by the capture: %d. l4lb on SIGTERM: %s.\n\n",
		strings.Join(ev, ", "), rep.Capture.Packets, rep.Capture.Drops, rep.L4lbExit)

	violations(p, rep)
	return b.String()
}

func violations(p func(string, ...any), rep *chaosReport) {
	p("### Violations\n\n")
	if rep.ViolationCount == 0 {
		p("None.\n")
	}
	for _, v := range rep.Violations {
		p("- %s\n", v)
	}
	if n := rep.ViolationCount - len(rep.Violations); n > 0 {
		p("- ... and %d more (report.json)\n", n)
	}
}

func sizeStr(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
