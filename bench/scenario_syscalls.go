package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// clockDriven are syscalls a proxy makes per unit of time rather than per
// connection: the Go runtime's sysmon sleeps (nanosleep) and async
// preemption (getpid + tgkill, rt_sigreturn after the signal), HAProxy's
// watchdog timer. Under strace the run lasts several times longer, so
// these are over-counted by that factor.
var clockDriven = []string{"nanosleep", "clock_nanosleep", "getpid", "tgkill", "rt_sigreturn", "timer_settime"}

const (
	syscallsWorkers = 4
	syscallsTop     = 15
	// syscallsMaxTime bounds the traced load: strace slows a proxy many
	// times over, and the count is exact at whatever N was reached.
	syscallsMaxTime = 60 * time.Second
)

// syscallsScenario: strace -f -c over the proxy's whole process tree while
// N connections of the conn workload (connect, 64 B each way, close) go
// through it. strace slows the proxy down, so only counts are reported,
// never time. One round: the count is exact, not statistical.
type syscallsScenario struct {
	// breakdown holds each system's top syscalls per connection, for the
	// report's notes (filled by run, read by finish).
	mu        *sync.Mutex
	breakdown map[string]string
}

func newSyscallsScenario() syscallsScenario {
	return syscallsScenario{mu: &sync.Mutex{}, breakdown: map[string]string{}}
}

func (syscallsScenario) name() string { return "syscalls" }
func (syscallsScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "syscalls_per_conn", Unit: "calls", Better: LowerBetter, Chart: true},
		{Name: "failed_per_conn", Unit: "calls", Better: LowerBetter},
		// The part of syscalls_per_conn that follows the clock, not the
		// connections: inflated by as much as strace stretches the run.
		{Name: "clock_driven_per_conn", Unit: "calls", Better: LowerBetter, NoRatio: true},
		{Name: "conns", Unit: "conns", Better: HigherBetter, NoRatio: true},
		{Name: "errors", Unit: "", Better: LowerBetter, NoRatio: true},
	}
}
func (syscallsScenario) rounds(options) int     { return 1 }
func (syscallsScenario) applies(s *system) bool { return isProxy(s) }

func (syscallsScenario) unavailable(*harness) error {
	if _, err := exec.LookPath("strace"); err != nil {
		return errors.New("strace not installed (apt-get install strace)")
	}
	return nil
}

func (sc syscallsScenario) finish(sr *ScenarioResult) {
	sr.Notes = append(sr.Notes, "strace -f -c over the proxy's process tree during N connections (connect, 64 B each way, close); "+
		"every syscall in that window counts, the proxy's idle background included; strace slows the proxy, so no time is reported, "+
		"and clock_driven_per_conn ("+strings.Join(clockDriven, ", ")+"), part of syscalls_per_conn, is over-counted by that slowdown")
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, r := range sr.Rows {
		if b, ok := sc.breakdown[r.System]; ok {
			sr.Notes = append(sr.Notes, fmt.Sprintf("%s per connection: %s", r.System, b))
		}
	}
}

// syscallsConns is N: 2000, 5000 in the full profile.
func syscallsConns(o options) int {
	if o.quick {
		return 2000
	}
	return 5000
}

func (sc syscallsScenario) run(h *harness, s *system) (map[string]float64, error) {
	pids := s.pids()
	if len(pids) == 0 {
		return nil, errors.New("no proxy process")
	}
	n := syscallsConns(h.opts)
	out := filepath.Join(h.dir, "strace-"+s.spec.name+".txt")
	args := []string{"-f", "-c", "-qq", "-o", out}
	for _, p := range pids {
		args = append(args, "-p", strconv.Itoa(p))
	}
	cmd := exec.Command("strace", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("strace: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	detach := func() error {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			return errors.New("strace did not exit on SIGINT; killed")
		}
	}
	if err := waitTraced(pids, cmd.Process.Pid, done, 10*time.Second); err != nil {
		_ = detach()
		return nil, fmt.Errorf("strace attach: %w (%s)", err, firstLine(stderr.String()))
	}
	t0 := time.Now()
	ok, bad := connCount(s.addr(routeEcho), n, syscallsWorkers, syscallsMaxTime)
	// Let the proxy see the backends' FINs and close its side.
	time.Sleep(300 * time.Millisecond)
	window := time.Since(t0)
	if err := detach(); err != nil && !isSignalExit(err) {
		return nil, fmt.Errorf("strace: %v (%s)", err, firstLine(stderr.String()))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	sum, err := parseStraceSummary(b)
	if err != nil {
		return nil, err
	}
	attempts := ok + bad
	if attempts == 0 {
		return nil, errors.New("no connection attempted")
	}
	per := func(v int64) float64 { return float64(v) / float64(attempts) }
	var clock int64
	for _, c := range sum.calls {
		if slices.Contains(clockDriven, c.name) {
			clock += c.calls
		}
	}
	vals := map[string]float64{
		"syscalls_per_conn":     per(sum.total.calls),
		"failed_per_conn":       per(sum.total.errors),
		"clock_driven_per_conn": per(clock),
		"conns":                 float64(ok),
		"errors":                float64(bad),
	}
	var parts []string
	h.logf("    syscalls %s: %d calls over %d connections (%d failed) in %v traced; per connection:",
		s.spec.name, sum.total.calls, attempts, bad, window.Round(time.Millisecond))
	for i, c := range sum.calls {
		if i == syscallsTop {
			break
		}
		note := ""
		if c.errors > 0 {
			note = fmt.Sprintf(" (%.2f failed)", per(c.errors))
		}
		h.logf("      %-16s %7.2f%s", c.name, per(c.calls), note)
		parts = append(parts, fmt.Sprintf("%s %.2f", c.name, per(c.calls)))
	}
	if len(sum.calls) > syscallsTop {
		var rest int64
		for _, c := range sum.calls[syscallsTop:] {
			rest += c.calls
		}
		parts = append(parts, fmt.Sprintf("%d others %.2f", len(sum.calls)-syscallsTop, per(rest)))
	}
	sc.mu.Lock()
	sc.breakdown[s.spec.name] = strings.Join(parts, ", ")
	sc.mu.Unlock()
	return vals, nil
}

// isSignalExit: strace re-raises the SIGINT it was stopped with.
func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ((ws.Signaled() && ws.Signal() == syscall.SIGINT) || ws.ExitStatus() == 130)
}

// waitTraced polls /proc/PID/task/TID/status until every thread of every
// pid shows tracer as its TracerPid (strace -f -p attaches all threads).
func waitTraced(pids []int, tracer int, exited <-chan error, d time.Duration) error {
	deadline := time.Now().Add(d)
	want := strconv.Itoa(tracer)
	for {
		all := true
		for _, p := range pids {
			for _, t := range threadIDs(p) {
				if tracerPid(fmt.Sprintf("/proc/%d/task/%d/status", p, t)) != want {
					all = false
				}
			}
		}
		if all {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("strace exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every thread traced after %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tracerPid(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// connCount runs n connections of the conn workload over workers, stopping
// early after maxTime. It returns the successful and failed attempts.
func connCount(addr string, n, workers int, maxTime time.Duration) (ok, bad int) {
	var next, okN, badN atomic.Int64
	end := time.Now().Add(maxTime)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			req := make([]byte, connMsg)
			rep := make([]byte, connMsg)
			for next.Add(1) <= int64(n) && time.Now().Before(end) {
				if err := connOnce(addr, req, rep); err != nil {
					badN.Add(1)
					time.Sleep(time.Millisecond) // do not spin on a refusing port
				} else {
					okN.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(okN.Load()), int(badN.Load())
}

// straceCount is one row of strace -c's summary.
type straceCount struct {
	name          string
	calls, errors int64
}

type straceSummary struct {
	calls []straceCount // by calls, most first
	total straceCount
}

// parseStraceSummary reads strace -c's table:
//
//	% time     seconds  usecs/call     calls    errors syscall
//	------ ----------- ----------- --------- --------- ----------------
//	 59.48    0.011306           2      4001           write
//	  0.18    0.000035           2        14         3 accept4
//	------ ----------- ----------- --------- --------- ----------------
//	100.00    0.019009           2      8977         3 total
//
// The errors column is blank when a call never failed.
func parseStraceSummary(b []byte) (straceSummary, error) {
	var sum straceSummary
	header, sawTotal := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "---"):
			continue
		case f[0] == "%":
			header = true
			if len(f) != 7 || f[4] != "calls" || f[5] != "errors" || f[6] != "syscall" {
				return sum, fmt.Errorf("strace summary: unknown header %q", sc.Text())
			}
			continue
		case !header:
			continue // strace's own messages before the table
		}
		// % time, seconds, usecs/call, calls, [errors], syscall
		if len(f) != 5 && len(f) != 6 {
			return sum, fmt.Errorf("strace summary: bad line %q", sc.Text())
		}
		c := straceCount{name: f[len(f)-1]}
		var err error
		if c.calls, err = strconv.ParseInt(f[3], 10, 64); err != nil {
			return sum, fmt.Errorf("strace summary: calls in %q: %w", sc.Text(), err)
		}
		if len(f) == 6 {
			if c.errors, err = strconv.ParseInt(f[4], 10, 64); err != nil {
				return sum, fmt.Errorf("strace summary: errors in %q: %w", sc.Text(), err)
			}
		}
		if c.name == "total" {
			sum.total, sawTotal = c, true
			continue
		}
		sum.calls = append(sum.calls, c)
	}
	if !header {
		return sum, errors.New("strace summary: no table (nothing traced?)")
	}
	if !sawTotal {
		return sum, errors.New("strace summary: no total line")
	}
	var n int64
	for _, c := range sum.calls {
		n += c.calls
	}
	if n != sum.total.calls {
		return sum, fmt.Errorf("strace summary: rows add up to %d calls, total says %d", n, sum.total.calls)
	}
	slices.SortStableFunc(sum.calls, func(a, b straceCount) int {
		switch {
		case a.calls > b.calls:
			return -1
		case a.calls < b.calls:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return sum, nil
}
