package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// chaosSpec is everything the run inside the namespace needs; the outer
// process writes it as JSON.
type chaosSpec struct {
	Dir        string        `json:"dir"`
	L4lb       string        `json:"l4lb"`
	Self       string        `json:"self"`
	Report     string        `json:"report"`
	Seed       uint64        `json:"seed"`
	Duration   time.Duration `json:"duration_ns"`
	Workers    int           `json:"workers"`
	MinSize    uint64        `json:"min_size"`
	MaxSize    uint64        `json:"max_size"`
	HalfClose  float64       `json:"half_close"`
	ResetShare float64       `json:"reset_share"`
	MaxConns   int           `json:"max_conns"`
	Stall      time.Duration `json:"stall_ns"`
	HoldMin    time.Duration `json:"hold_min_ns"`
	HoldMax    time.Duration `json:"hold_max_ns"`
	GapMin     time.Duration `json:"gap_min_ns"`
	GapMax     time.Duration `json:"gap_max_ns"`
	Readmit    time.Duration `json:"readmit_ns"` // bound on every backend usable again after the last fault
	Settle     time.Duration `json:"settle_ns"`  // bound on resources back at baseline
	RSSTolKB   float64       `json:"rss_tolerance_kb"`
	// FailFast skips the fault run when the warm-up (no faults) already
	// broke a rule: CI learns as much, sooner.
	FailFast bool `json:"fail_fast"`
}

// The warm-up: small streams through healthy backends, before the baseline.
const (
	chaosWarmConns = 40
	chaosWarmStall = 5 * time.Second
)

// Addresses inside the run's own namespace (its loopback is private, so
// fixed ports cannot collide with anything on the host).
const (
	chaosListen     = "127.0.0.1:18000"
	chaosListenPort = 18000
	chaosAdmin      = "127.0.0.1:19000"
	chaosPortBase   = 19100 // backend i listens on chaosPortBase+i
	chaosBackends   = 3     // backend 1 is never faulted
	chaosGoroutTol  = 0     // goroutines must come back exactly
	chaosFdTol      = 0     // fds (net of pooled idle pipes) must come back exactly
)

func chaosBackendAddr(id int) string { return loopAddr(chaosPortBase + id) }

// chaosL4lbConfig: health checks and the breaker on, with short intervals
// and cooldowns so that trips, probes and readmissions happen many times.
func chaosL4lbConfig() string {
	var b strings.Builder
	b.WriteString(`[global]
shutdown_timeout = "5s"

[admin]
listen = "` + chaosAdmin + `"

[log]
level = "debug"
format = "json"

[[listener]]
name = "chaos"
bind = "` + chaosListen + `"
protocol = "tcp"
pool = "chaos"

[pool.chaos]
algorithm = "round-robin"
connect_timeout = "500ms"
connect_budget = "2s"
idle_timeout = "60s"
retries = 2
`)
	for i := 1; i <= chaosBackends; i++ {
		fmt.Fprintf(&b, "\n[[pool.chaos.backend]]\naddr = %q\n", chaosBackendAddr(i))
	}
	b.WriteString(`
[pool.chaos.health]
enabled = true
interval = "300ms"
timeout = "250ms"
rise = 2
fall = 2

[pool.chaos.breaker]
failures = 3
window = "5s"
cooldown = "500ms"
max_cooldown = "2s"
successes = 1
`)
	return b.String()
}

// runChaosInnerRole is the chaos run proper, inside the namespace.
func runChaosInnerRole(args []string) error {
	fs := flag.NewFlagSet("chaos-inner", flag.ContinueOnError)
	specPath := fs.String("spec", "", "the run's spec (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*specPath)
	if err != nil {
		return err
	}
	var spec chaosSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	rep, err := chaosInner(ctx, spec, os.Stderr)
	if rep != nil {
		out, jerr := json.MarshalIndent(rep, "", " ")
		if jerr != nil {
			return jerr
		}
		if werr := os.WriteFile(spec.Report, out, 0o644); werr != nil {
			return werr
		}
	}
	return err
}

type chaosRun struct {
	spec     chaosSpec
	log      io.Writer
	backends []*chaosBackendProc
	l4lb     *chaosProc
	scr      *scraper
	tl       faultTimeline
	rep      *chaosReport
	// goroutinesBefore is l4lb's goroutine dump at the baseline.
	goroutinesBefore string
}

func (r *chaosRun) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "chaos: "+format+"\n", args...)
}

// maxViolationsListed caps the list in the report; the count is complete.
const maxViolationsListed = 200

func (r *chaosRun) violation(format string, args ...any) {
	r.rep.ViolationCount++
	if len(r.rep.Violations) >= maxViolationsListed {
		return
	}
	msg := fmt.Sprintf(format, args...)
	r.rep.Violations = append(r.rep.Violations, msg)
	r.logf("VIOLATION: %s", msg)
}

// chaosInner sets up backends, l4lb, the capture and nftables in the
// current (private) namespace, runs the clients under the fault schedule,
// then judges. It returns a report whenever l4lb ran; the error is for a
// run that could not be carried out (not for violations: those are in the
// report).
func chaosInner(ctx context.Context, spec chaosSpec, log io.Writer) (*chaosReport, error) {
	r := &chaosRun{spec: spec, log: log, scr: newScraper(chaosAdmin)}
	r.rep = &chaosReport{Started: time.Now().UTC().Format(time.RFC3339), Spec: spec, L4lbConfig: chaosL4lbConfig()}
	defer r.tearDown()

	var faulted []int
	for i := 2; i <= chaosBackends; i++ {
		faulted = append(faulted, i)
	}
	if err := nftSetUp(faulted); err != nil {
		return nil, err
	}
	capt, err := newCtlCapture()
	if err != nil {
		return nil, err
	}
	var pkts []ctlPacket
	captured := false
	stopCapture := func() {
		if !captured {
			captured = true
			pkts = capt.close()
		}
	}
	defer stopCapture()

	for i := 1; i <= chaosBackends; i++ {
		b := &chaosBackendProc{id: i, addr: chaosBackendAddr(i), port: chaosPortBase + i, self: spec.Self,
			events: filepath.Join(spec.Dir, fmt.Sprintf("backend-%d.events", i)),
			log:    filepath.Join(spec.Dir, fmt.Sprintf("backend-%d.log", i))}
		if err := b.start(); err != nil {
			return nil, fmt.Errorf("backend %d: %w", i, err)
		}
		r.backends = append(r.backends, b)
	}
	cfgPath := filepath.Join(spec.Dir, "l4lb.toml")
	if err := os.WriteFile(cfgPath, []byte(r.rep.L4lbConfig), 0o644); err != nil {
		return nil, err
	}
	r.l4lb, err = startChaosProc("l4lb", spec.L4lb, []string{"-config", cfgPath}, filepath.Join(spec.Dir, "l4lb.log"), false)
	if err != nil {
		return nil, err
	}
	r.rep.L4lbPID = r.l4lb.pid
	if err := r.waitUp(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	r.logf("l4lb pid %d up, backends %v", r.l4lb.pid, r.backendPIDs())

	// Warm-up on healthy backends: every stream must be exact, and lazily
	// made state (pooled pipes, buffers, runtime threads) exists before the
	// baseline is taken.
	warm := &chaosClients{cfg: chaosClientConfig{Addr: chaosListen, Workers: 4, MinSize: 16, MaxSize: 256 << 10,
		HalfClose: 0.5, Stall: chaosWarmStall, MaxConns: chaosWarmConns, StopOnFailure: spec.FailFast}, seed: spec.Seed ^ 0x5eed}
	warm.run(nil)
	for _, c := range warm.results() {
		r.rep.Warmup.Conns++
		if c.Outcome != outExact {
			r.rep.Warmup.Failed++
			r.violation("warm-up, no fault anywhere: connection %d (client port %d, backend %d, l4lb port %d, %d/%d bytes, half-close %v): %s: %s",
				c.ID, c.ClientPort, c.Backend, c.PeerPort, c.ReqLen, c.RespLen, c.HalfClose, c.Outcome, c.Detail)
		}
	}
	if r.rep.Warmup.Failed > 0 && spec.FailFast {
		r.logf("%d of %d warm-up streams failed with no fault anywhere: the fault run is not started", r.rep.Warmup.Failed, r.rep.Warmup.Conns)
		return r.rep, nil
	}
	if err := r.waitUsable(ctx, 10*time.Second); err != nil {
		return r.rep, err
	}
	time.Sleep(time.Second)
	before, err := r.baseline()
	if err != nil {
		return r.rep, err
	}
	r.rep.Resources.Before = before
	r.goroutinesBefore, _ = r.scr.goroutineDump()
	_ = os.WriteFile(filepath.Join(spec.Dir, "goroutines-before.txt"), []byte(r.goroutinesBefore), 0o644)
	r.logf("baseline: %d fds (%d pipe fds, %v idle pipes), %v goroutines, %.0f KB RSS",
		before.Fds, before.PipeFds, before.PipesIdle, before.Goroutines, before.RSSKB)

	// The run: samples, fault schedules, clients.
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	var samplesMu sync.Mutex
	var l4lbDied bool
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampler:
				return
			case <-t.C:
			}
			if !r.l4lb.alive() {
				samplesMu.Lock()
				l4lbDied = true
				samplesMu.Unlock()
				return
			}
			if s, err := sampleResources(r.l4lb.pid, r.scr); err == nil {
				samplesMu.Lock()
				r.rep.Resources.Samples = append(r.rep.Resources.Samples, s)
				samplesMu.Unlock()
			}
		}
	}()

	stopFaults := make(chan struct{})
	var schedWG sync.WaitGroup
	schedErr := make(chan error, chaosBackends)
	for _, id := range faulted {
		s := &faultSchedule{be: r.backends[id-1], tl: &r.tl, rng: rand.New(rand.NewPCG(spec.Seed, uint64(100+id))),
			holdMin: spec.HoldMin, holdMax: spec.HoldMax, gapMin: spec.GapMin, gapMax: spec.GapMax, logf: r.logf}
		schedWG.Go(func() {
			if err := s.run(stopFaults); err != nil {
				schedErr <- err
			}
		})
	}
	cl := &chaosClients{cfg: chaosClientConfig{Addr: chaosListen, Workers: spec.Workers, MinSize: spec.MinSize,
		MaxSize: spec.MaxSize, HalfClose: spec.HalfClose, ResetShare: spec.ResetShare, Stall: spec.Stall,
		MaxConns: spec.MaxConns}, seed: spec.Seed}
	stopClients := make(chan struct{})
	clientsDone := make(chan struct{})
	loadStart := time.Now()
	go func() {
		defer close(clientsDone)
		cl.run(stopClients)
	}()

	var runErr error
	progress := time.NewTicker(10 * time.Second)
	deadline := time.After(spec.Duration)
wait:
	for {
		select {
		case <-deadline:
			break wait
		case <-ctx.Done():
			runErr = errors.New("interrupted")
			break wait
		case err := <-schedErr:
			runErr = err
			break wait
		case <-clientsDone:
			break wait // MaxConns reached
		case <-progress.C:
			r.logf("%3.0fs: %d connections, %d open, %d faults", time.Since(loadStart).Seconds(),
				len(cl.results()), cl.open.Load(), len(r.tl.snapshot()))
		}
	}
	progress.Stop()
	if ctx.Err() != nil {
		// Interrupted: undo the faults and leave; tearDown stops the rest.
		close(stopFaults)
		schedWG.Wait()
		close(stopClients)
		return r.rep, runErr
	}
	// Faults end first (each undone where it stands), then no new client
	// starts; those in flight finish, each bounded by the stall limit.
	close(stopFaults)
	schedWG.Wait()
	close(stopClients)
	r.rep.RunSeconds = time.Since(loadStart).Seconds()
	drainLimit := 2*spec.Stall + 30*time.Second
	select {
	case <-clientsDone:
	case <-time.After(drainLimit):
		r.violation("%d client connections still open %v after the run ended", cl.open.Load(), drainLimit)
	}
	r.rep.DrainSeconds = time.Since(loadStart).Seconds() - r.rep.RunSeconds
	if runErr == nil {
		select {
		case err := <-schedErr:
			runErr = err
		default:
		}
	}
	r.logf("load done: %d connections in %.0fs (+%.1fs drain), %d faults",
		len(cl.results()), r.rep.RunSeconds, r.rep.DrainSeconds, len(r.tl.snapshot()))

	// After: every backend readmitted, then resources back at baseline.
	if runErr == nil && r.l4lb.alive() {
		t0 := time.Now()
		if err := r.waitUsable(ctx, spec.Readmit); err != nil {
			r.violation("after the last fault: %v", err)
		}
		r.rep.ReadmitSeconds = time.Since(t0).Seconds()
		r.settle(ctx)
	}
	close(stopSampler)
	<-samplerDone
	if l4lbDied || !r.l4lb.alive() {
		r.violation("l4lb exited during the run: %v (see l4lb.log)", r.l4lb.err)
	} else if ps, err := r.scr.scrape(); err == nil {
		r.rep.Breaker, r.rep.ClientResults = breakerStats(ps), clientResults(ps)
		r.rep.Metrics = ps.forReport()
	}
	// l4lb must stop cleanly (SIGTERM: drain, exit 0).
	if r.l4lb.alive() {
		clean := r.l4lb.terminate(10 * time.Second)
		r.rep.L4lbExit = fmt.Sprintf("%v", r.l4lb.err)
		if r.l4lb.err == nil {
			r.rep.L4lbExit = "exit 0"
		}
		if !clean || r.l4lb.err != nil {
			r.violation("l4lb did not exit cleanly on SIGTERM: %s", r.rep.L4lbExit)
		}
	}
	for _, b := range r.backends {
		b.current().kill()
	}
	stopCapture()
	r.rep.Capture = captureStats{Packets: len(pkts), Drops: capt.drops, Seen: capt.seen}
	if runErr != nil {
		return r.rep, runErr
	}
	r.analyse(cl.results(), pkts)
	r.rep.Passed = r.rep.ViolationCount == 0
	return r.rep, nil
}

func (r *chaosRun) backendPIDs() []int {
	var out []int
	for _, b := range r.backends {
		out = append(out, b.current().pid)
	}
	return out
}

// tearDown kills whatever is still running (every exit path).
func (r *chaosRun) tearDown() {
	for _, b := range r.backends {
		if p := b.current(); p != nil && p.alive() {
			_ = syscall.Kill(-p.pid, syscall.SIGCONT)
			p.kill()
		}
	}
	if r.l4lb != nil && r.l4lb.alive() {
		r.l4lb.kill()
	}
	_ = nftScript(fmt.Sprintf("delete table inet %s\n", chaosNftTable))
}

// waitUp waits for l4lb's admin endpoint and listener.
func (r *chaosRun) waitUp(ctx context.Context, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		if !r.l4lb.alive() {
			return fmt.Errorf("l4lb exited at start: %v (see %s)", r.l4lb.err, filepath.Join(r.spec.Dir, "l4lb.log"))
		}
		if _, err := r.scr.scrape(); err == nil {
			if c, err := net.DialTimeout("tcp4", chaosListen, time.Second); err == nil {
				c.Close()
				return r.waitUsable(ctx, limit)
			}
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return fmt.Errorf("l4lb not serving after %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitUsable waits until l4lb reports every backend usable.
func (r *chaosRun) waitUsable(ctx context.Context, limit time.Duration) error {
	end := time.Now().Add(limit)
	var down []string
	for {
		down = down[:0]
		ps, err := r.scr.scrape()
		if err == nil {
			for i := 1; i <= chaosBackends; i++ {
				if ps.sum("l4lb_backend_up", "backend", chaosBackendAddr(i)) != 1 {
					down = append(down, fmt.Sprintf("backend %d (breaker open %v, health up %v)", i,
						ps.sum("l4lb_breaker_open", "backend", chaosBackendAddr(i)),
						ps.sum("l4lb_health_up", "backend", chaosBackendAddr(i))))
				}
			}
			if len(down) == 0 {
				return nil
			}
		}
		if time.Now().After(end) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("metrics: %v", err)
			}
			return fmt.Errorf("not usable after %v: %s", limit, strings.Join(down, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// baseline is taken from 12 samples, 250 ms apart: goroutines and fds
// are the most frequent value (a health check or probe in flight adds one
// now and then; a goroutine that is restarted may be missing from one
// sample), everything else the least.
func (r *chaosRun) baseline() (resSample, error) {
	var b resSample
	var gs, fs []int
	var fdOf = map[int]resSample{}
	for i := range 12 {
		s, err := sampleResources(r.l4lb.pid, r.scr)
		if err != nil {
			return b, err
		}
		if i == 0 {
			b = s
		} else {
			b = minSample(b, s)
		}
		gs = append(gs, int(s.Goroutines))
		fs = append(fs, s.netFds())
		if _, ok := fdOf[s.netFds()]; !ok {
			fdOf[s.netFds()] = s
		}
		time.Sleep(250 * time.Millisecond)
	}
	b.Goroutines = float64(mode(gs))
	f := fdOf[mode(fs)]
	b.Fds, b.PipeFds, b.SocketFds, b.PipesIdle = f.Fds, f.PipeFds, f.SocketFds, f.PipesIdle
	return b, nil
}

// mode is the most frequent value; the least of equally frequent ones.
func mode(v []int) int {
	n := map[int]int{}
	best := 0
	for i, x := range v {
		n[x]++
		if i == 0 || n[x] > n[best] || (n[x] == n[best] && x < best) {
			best = x
		}
	}
	return best
}

func minSample(a, s resSample) resSample {
	if s.netFds() < a.netFds() {
		a.Fds, a.PipeFds, a.SocketFds, a.PipesIdle = s.Fds, s.PipeFds, s.SocketFds, s.PipesIdle
	}
	a.RSSKB = min(a.RSSKB, s.RSSKB)
	a.Goroutines = min(a.Goroutines, s.Goroutines)
	a.Threads = min(a.Threads, s.Threads)
	a.PipesBusy = min(a.PipesBusy, s.PipesBusy)
	a.ConnsActive = min(a.ConnsActive, s.ConnsActive)
	a.ClientsOpen = min(a.ClientsOpen, s.ClientsOpen)
	return a
}

// back reports what of s is not yet back at baseline b ("" when all is).
func (r *chaosRun) back(b, s resSample) string {
	var out []string
	if s.netFds() > b.netFds()+chaosFdTol {
		out = append(out, fmt.Sprintf("fds net of idle pipes %d > %d", s.netFds(), b.netFds()))
	}
	if s.Goroutines > b.Goroutines+chaosGoroutTol {
		out = append(out, fmt.Sprintf("goroutines %v > %v", s.Goroutines, b.Goroutines))
	}
	if s.PipesBusy > 0 {
		out = append(out, fmt.Sprintf("%v busy pipes", s.PipesBusy))
	}
	if s.ConnsActive > 0 || s.ClientsOpen > 0 {
		out = append(out, fmt.Sprintf("%v backend connections, %v clients open", s.ConnsActive, s.ClientsOpen))
	}
	if s.RSSKB > b.RSSKB+r.spec.RSSTolKB {
		out = append(out, fmt.Sprintf("RSS %.0f KB > %.0f + %.0f KB", s.RSSKB, b.RSSKB, r.spec.RSSTolKB))
	}
	return strings.Join(out, ", ")
}

// settle polls until l4lb's resources are back at the baseline, within
// spec.Settle.
func (r *chaosRun) settle(ctx context.Context) {
	t0 := time.Now()
	end := t0.Add(r.spec.Settle)
	var last resSample
	var why string
	for {
		s, err := sampleResources(r.l4lb.pid, r.scr)
		if err == nil {
			last = s
			if why = r.back(r.rep.Resources.Before, s); why == "" {
				break
			}
		} else {
			why = err.Error()
		}
		if time.Now().After(end) || ctx.Err() != nil {
			extra := ""
			if dump, err := r.scr.goroutineDump(); err == nil {
				_ = os.WriteFile(filepath.Join(r.spec.Dir, "goroutines-after.txt"), []byte(dump), 0o644)
				if g := goroutineGrowth(r.goroutinesBefore, dump); len(g) > 0 {
					extra = "; goroutines added since the baseline: " + strings.Join(g, "; ")
				}
			}
			r.violation("resources not back at baseline %v after the clients stopped: %s%s", r.spec.Settle, why, extra)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.rep.Resources.After = last
	r.rep.Resources.SettleSeconds = time.Since(t0).Seconds()
}
