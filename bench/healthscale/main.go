// Command healthscale measures l4lb's health checker at scale: N probers
// (TCP connect checks) against listeners on 127.0.0.1 held by a child
// process (so their accept and close are not the checker's cost) and a set
// of closed ports (refused: failing checks), every -interval. It reports the
// checker's goroutines, heap and stack memory, CPU per check (getrusage of
// this process over the window, divided by the checks made in it) and how
// the check start times spread over 100 ms slices of the window.
//
//	go run ./bench/healthscale                      # 500 listening + 500 closed, 2 s, goroutine per prober
//	go run ./bench/healthscale -mode scheduler      # the same on a health.Scheduler
//	go run ./bench/healthscale -mode both -json out.json   # each in a process of its own
//	go run ./bench/healthscale -mode both -stall 3s -window 8   # SIGSTOP for 3 s, then how soon checks spread again
//
// About 20 s a mode with the defaults (2 intervals of warm-up, 5 measured).
// docs/bench-notes.md ("health checks at scale") has the figures.
//
// Everything listens and connects on 127.0.0.1 only. The listener child is
// this binary (-role listeners), in its own process group with Pdeathsig,
// stopped by pid at the end.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/pkg/health"
)

func main() {
	role := flag.String("role", "", "internal: listeners (the child holding the live backends)")
	live := flag.Int("live", 500, "backends that accept (checks pass)")
	closed := flag.Int("closed", 500, "closed ports (checks are refused: fail)")
	interval := flag.Duration("interval", 2*time.Second, "health check interval")
	timeout := flag.Duration("timeout", time.Second, "health check timeout")
	warm := flag.Int("warm", 2, "intervals run before the window")
	window := flag.Int("window", 5, "intervals measured")
	mode := flag.String("mode", "run", "run (a goroutine per prober, Prober.Run), scheduler (one health.Scheduler), or both")
	workers := flag.Int("workers", 0, "scheduler mode: at most this many checks at once (0: no bound but one per prober)")
	jsonOut := flag.String("json", "", "also write the results as JSON here")
	stallFor := flag.Duration("stall", 0, "stop the process (SIGSTOP) this long after the warm-up; the window starts when it resumes")
	quiet := flag.Bool("quiet", false, "internal: print nothing (a child of -mode both)")
	flag.Parse()
	if *role == "listeners" {
		listeners(*live)
		return
	}
	var results []result
	switch *mode {
	case "both":
		// Each mode in a process of its own (with listeners of its own),
		// so neither inherits the other's stacks and heap.
		for _, m := range []string{"run", "scheduler"} {
			r, err := runChild(m)
			if err != nil {
				log.Fatal(err)
			}
			results = append(results, r)
		}
	case "run", "scheduler":
		addrs, stop, err := startListeners(*live)
		if err != nil {
			log.Fatal(err)
		}
		dead, err := closedPorts(*closed)
		if err != nil {
			stop()
			log.Fatal(err)
		}
		results = append(results, measure(*mode, append(addrs, dead...), *live,
			config{*interval, *timeout, *warm, *window, *workers, *stallFor}))
		stop()
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
	for _, r := range results {
		if !*quiet {
			r.print(os.Stdout)
		}
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		b = append(b, '\n')
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			log.Print(err)
		}
	}
}

// runChild runs this binary with the same flags but -mode m and reads its
// result.
func runChild(m string) (result, error) {
	f, err := os.CreateTemp("", "healthscale-*.json")
	if err != nil {
		return result{}, err
	}
	f.Close()
	defer os.Remove(f.Name())
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	var args []string
	flag.Visit(func(fl *flag.Flag) {
		if fl.Name != "mode" && fl.Name != "json" {
			args = append(args, "-"+fl.Name+"="+fl.Value.String())
		}
	})
	args = append(args, "-mode", m, "-json", f.Name(), "-quiet")
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("-mode %s: %w", m, err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return result{}, err
	}
	var rs []result
	if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 1 {
		return result{}, fmt.Errorf("-mode %s: bad result (%v)", m, err)
	}
	return rs[0], nil
}

type config struct {
	interval, timeout time.Duration
	warm, window      int
	workers           int
	stall             time.Duration
}

type result struct {
	Mode     string `json:"mode"`
	Probers  int    `json:"probers"`
	Live     int    `json:"live"`
	Interval string `json:"interval"`
	Workers  int    `json:"workers,omitempty"`

	Goroutines     int64   `json:"goroutines"`             // in the window, minus the baseline
	GoroutinesMax  int64   `json:"goroutines_max"`         // highest sample, minus the baseline
	StackBytes     float64 `json:"stack_bytes"`            // /memory/classes/heap/stacks, mean of samples, minus the baseline
	StackBytesMax  uint64  `json:"stack_bytes_max"`        // highest sample, minus the baseline
	StartingStack  uint64  `json:"starting_stack"`         // /gc/stack/starting-size at the end
	HeapLive       int64   `json:"heap_live"`              // heap objects after a forced GC, minus the baseline
	HeapSampledAvg float64 `json:"heap_sampled"`           // heap objects (live + garbage) mean of samples, minus the baseline
	RSSKiB         int64   `json:"rss_kib"`                // VmRSS at the end, minus the baseline
	WorkersMean    float64 `json:"workers_mean,omitempty"` // scheduler: worker goroutines alive, mean of samples
	WorkersMax     int     `json:"workers_max,omitempty"`

	Checks       uint64  `json:"checks"`
	Passes       uint64  `json:"passes"`
	Fails        uint64  `json:"fails"`
	CPUPerCheck  float64 `json:"cpu_us_per_check"` // user + sys µs of this process / checks
	UserPerCheck float64 `json:"user_us_per_check"`
	SysPerCheck  float64 `json:"sys_us_per_check"`
	WallLatency  float64 `json:"latency_us_mean"` // mean check duration
	LatencyMax   float64 `json:"latency_us_max"`
	SlowChecks   uint64  `json:"checks_over_1ms"`

	Slices     int     `json:"slices"`
	SliceMean  float64 `json:"slice_mean"`
	SliceMax   uint64  `json:"slice_max"`
	SliceMin   uint64  `json:"slice_min"`
	SpreadMax  float64 `json:"spread_max_over_mean"`
	FirstMax   uint64  `json:"first_interval_slice_max"` // the first interval after start (where a start-up burst would show)
	FirstMean  float64 `json:"first_interval_slice_mean"`
	FirstRatio float64 `json:"first_interval_max_over_mean"`
	// PerInterval is max/mean of each interval of the window on its own
	// (after a stall: how soon the checks spread out again).
	PerInterval []float64 `json:"per_interval_max_over_mean"`
	Stall       string    `json:"stall"`
	// GapMs is, start to start, a check's distance from Interval after
	// the one before, in ms: min, p1, p50, p99, max.
	GapMs [5]float64 `json:"gap_minus_interval_ms"`
}

func (r result) print(w io.Writer) {
	n := float64(r.Probers)
	fmt.Fprintf(w, "mode %s: %d probers (%d listening, %d closed), interval %s", r.Mode, r.Probers, r.Live, r.Probers-r.Live, r.Interval)
	if r.Mode == "scheduler" {
		fmt.Fprintf(w, ", workers bound %d (0: none)", r.Workers)
	}
	if r.Stall != "0s" {
		fmt.Fprintf(w, ", process stopped %s after the warm-up", r.Stall)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  goroutines        %d (max %d) above the baseline", r.Goroutines, r.GoroutinesMax)
	if r.Mode == "scheduler" {
		fmt.Fprintf(w, "; scheduler workers %.1f (max %d)", r.WorkersMean, r.WorkersMax)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  stacks            %.0f B mean, %d B max above the baseline: %.0f B per prober (starting size %d B)\n",
		r.StackBytes, r.StackBytesMax, r.StackBytes/n, r.StartingStack)
	fmt.Fprintf(w, "  heap live         %d B after GC above the baseline: %.0f B per prober (sampled live+garbage mean %.0f B)\n",
		r.HeapLive, float64(r.HeapLive)/n, r.HeapSampledAvg)
	fmt.Fprintf(w, "  stacks+heap       %.0f B per prober; RSS +%d KiB\n", (r.StackBytes+float64(r.HeapLive))/n, r.RSSKiB)
	fmt.Fprintf(w, "  checks            %d in the window (%d pass, %d fail)\n", r.Checks, r.Passes, r.Fails)
	fmt.Fprintf(w, "  CPU per check     %.1f µs (user %.1f, sys %.1f)\n", r.CPUPerCheck, r.UserPerCheck, r.SysPerCheck)
	fmt.Fprintf(w, "  check duration    mean %.1f µs, max %.0f µs, %d over 1 ms\n", r.WallLatency, r.LatencyMax, r.SlowChecks)
	fmt.Fprintf(w, "  spread            %d slices of 100 ms: mean %.1f, min %d, max %d: max/mean %.2f\n",
		r.Slices, r.SliceMean, r.SliceMin, r.SliceMax, r.SpreadMax)
	fmt.Fprintf(w, "  per interval      max/mean %v\n", r.PerInterval)
	fmt.Fprintf(w, "  first interval    max %d, mean %.1f: max/mean %.2f\n", r.FirstMax, r.FirstMean, r.FirstRatio)
	fmt.Fprintf(w, "  start to start    interval %+.1f / %+.1f / %+.1f / %+.1f / %+.1f ms (min, p1, p50, p99, max)\n",
		r.GapMs[0], r.GapMs[1], r.GapMs[2], r.GapMs[3], r.GapMs[4])
}

const slice = 100 * time.Millisecond

func measure(mode string, targets []string, live int, c config) result {
	n := len(targets)
	total := c.warm + c.window
	span := time.Duration(total+1)*c.interval + c.stall
	nslices := int(span / slice)
	counts := make([]atomic.Uint64, nslices)
	// Each prober's check start times, in storage allocated before the
	// baseline so that recording them adds nothing to the checker's heap.
	starts := make([][]time.Time, n)
	for i := range starts {
		starts[i] = make([]time.Time, 0, int(span/c.interval)+4)
	}
	var checks, passes, fails, latency, slow, maxLat atomic.Uint64
	var t0 time.Time
	var counting atomic.Bool
	runtime.GC()
	base := sample()
	baseRSS := rssKiB()

	probers := make([]*health.Prober, n)
	for i, addr := range targets {
		tcp := health.TCPCheck(nil, addr, nil)
		mine := &starts[i]
		check := func(ctx context.Context) health.Outcome {
			start := time.Now()
			if len(*mine) < cap(*mine) {
				*mine = append(*mine, start)
			}
			if k := int(start.Sub(t0) / slice); k >= 0 && k < nslices {
				counts[k].Add(1)
			}
			r := tcp(ctx)
			if counting.Load() {
				checks.Add(1)
				d := time.Since(start)
				latency.Add(uint64(d))
				if d > time.Millisecond {
					slow.Add(1)
				}
				for {
					m := maxLat.Load()
					if uint64(d) <= m || maxLat.CompareAndSwap(m, uint64(d)) {
						break
					}
				}
				if r.Result == health.Pass {
					passes.Add(1)
				} else {
					fails.Add(1)
				}
			}
			return r
		}
		p, err := health.New("scale/"+addr, health.Config{Enabled: true, Interval: c.interval, Timeout: c.timeout}, check, health.Options{})
		if err != nil {
			log.Fatal(err)
		}
		probers[i] = p
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sched *health.Scheduler
	t0 = time.Now()
	switch mode {
	case "run":
		for _, p := range probers {
			wg.Go(func() { p.Run(ctx) })
		}
	case "scheduler":
		sched = startScheduler(ctx, &wg, probers, c.workers)
	}
	time.Sleep(time.Until(t0.Add(time.Duration(c.warm) * c.interval)))
	if c.stall > 0 {
		stall(c.stall)
	}
	winStart := int(time.Since(t0)/slice) + 1
	end := t0.Add(time.Duration(winStart)*slice + time.Duration(c.window)*c.interval)
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	counting.Store(true)
	var samples []snapshot
	var workers []int
	for time.Now().Before(end) {
		time.Sleep(min(250*time.Millisecond, time.Until(end)))
		samples = append(samples, sample())
		if sched != nil {
			workers = append(workers, sched.Stats().Workers)
		}
	}
	counting.Store(false)
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	runtime.GC()
	live2 := sample()
	rss := rssKiB()
	cancel()
	wg.Wait()

	r := result{Mode: mode, Probers: n, Live: live, Interval: c.interval.String(), Workers: c.workers, Stall: c.stall.String()}
	var stackSum float64
	var heapSum float64
	for _, s := range samples {
		g := int64(s.goroutines) - int64(base.goroutines)
		r.GoroutinesMax = max(r.GoroutinesMax, g)
		r.Goroutines += g
		st := s.stacks - base.stacks
		stackSum += float64(st)
		r.StackBytesMax = max(r.StackBytesMax, st)
		heapSum += float64(s.heap) - float64(base.heap)
	}
	r.Goroutines /= int64(len(samples))
	r.StackBytes = stackSum / float64(len(samples))
	r.HeapSampledAvg = heapSum / float64(len(samples))
	for _, w := range workers {
		r.WorkersMean += float64(w) / float64(len(workers))
		r.WorkersMax = max(r.WorkersMax, w)
	}
	r.StartingStack = live2.startingStack
	r.HeapLive = int64(live2.heap) - int64(base.heap)
	r.RSSKiB = rss - baseRSS
	r.Checks, r.Passes, r.Fails = checks.Load(), passes.Load(), fails.Load()
	user := tv(after.Utime) - tv(before.Utime)
	sys := tv(after.Stime) - tv(before.Stime)
	if r.Checks > 0 {
		r.UserPerCheck = user / float64(r.Checks)
		r.SysPerCheck = sys / float64(r.Checks)
		r.CPUPerCheck = r.UserPerCheck + r.SysPerCheck
		r.WallLatency = float64(latency.Load()) / 1e3 / float64(r.Checks)
		r.LatencyMax = float64(maxLat.Load()) / 1e3
		r.SlowChecks = slow.Load()
	}
	// The spread over the window (whole intervals after the warm-up, and
	// the stall if any).
	per := int(c.interval / slice)
	win := counts[winStart : winStart+c.window*per]
	r.Slices = len(win)
	r.SliceMean, r.SliceMin, r.SliceMax = stats(win)
	r.SpreadMax = float64(r.SliceMax) / r.SliceMean
	for i := range c.window {
		m, _, hi := stats(win[i*per : (i+1)*per])
		r.PerInterval = append(r.PerInterval, math.Round(100*float64(hi)/m)/100)
	}
	// The first interval (the phases the probers started with).
	r.FirstMean, _, r.FirstMax = stats(counts[:per])
	r.FirstRatio = float64(r.FirstMax) / r.FirstMean
	// Start to start, how far each check was from Interval after the one
	// before, within the window.
	var dev []float64
	winT := t0.Add(time.Duration(winStart) * slice)
	for _, st := range starts {
		for i := 1; i < len(st); i++ {
			if st[i-1].After(winT) {
				dev = append(dev, float64(st[i].Sub(st[i-1])-c.interval)/1e6)
			}
		}
	}
	if len(dev) > 0 {
		slices.Sort(dev)
		q := func(f float64) float64 { return dev[int(f*float64(len(dev)-1))] }
		r.GapMs = [5]float64{q(0), q(0.01), q(0.5), q(0.99), q(1)}
	}
	return r
}

// stall stops this process for d (SIGSTOP, then SIGCONT from a shell that
// outlives the stop), as a VM pause or a debugger would: every timer that
// came due meanwhile fires at once when it resumes.
func stall(d time.Duration) {
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("kill -STOP %d; sleep %.3f; kill -CONT %d", os.Getpid(), d.Seconds(), os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		log.Printf("stall: %v", err)
	}
}

func stats(c []atomic.Uint64) (mean float64, lo, hi uint64) {
	lo = ^uint64(0)
	var sum uint64
	for i := range c {
		v := c[i].Load()
		sum += v
		lo, hi = min(lo, v), max(hi, v)
	}
	return float64(sum) / float64(len(c)), lo, hi
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec)*1e6 + float64(t.Usec) }

type snapshot struct {
	goroutines, stacks, heap, startingStack uint64
}

var names = []string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/heap/objects:bytes",
	"/gc/stack/starting-size:bytes",
}

func sample() snapshot {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	return snapshot{s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()}
}

func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// closedPorts finds n ports on 127.0.0.1 nothing listens on: bound, then
// closed. A connect there is refused.
func closedPorts(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out, nil
}

// startListeners starts this binary as the listener child and reads its
// addresses.
func startListeners(n int) ([]string, func(), error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, "-role", "listeners", "-live", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	pid := cmd.Process.Pid
	stop := func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	var addrs []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			go io.Copy(io.Discard, out)
			return addrs, stop, nil
		}
		addrs = append(addrs, line)
	}
	stop()
	return nil, nil, errors.New("listener child exited before it was ready")
}

// listeners is the child: n listeners on 127.0.0.1 that accept and close.
func listeners(n int) {
	w := bufio.NewWriter(os.Stdout)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Fprintln(w, ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	fmt.Fprintln(w, "ready")
	w.Flush()
	select {}
}
