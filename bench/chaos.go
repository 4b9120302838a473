package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The chaos scenario (go run ./bench -scenario chaos -duration 5m): l4lb
// built from this tree, three backends and the clients, all in a network
// namespace the run makes for itself, under a fault schedule on every
// backend but the first. See docs/chaos.md.
//
// Layout: this process (outside) builds l4lb, makes the namespace, runs a
// copy of itself inside it (-role chaos-inner: chaos_inner.go), reads the
// report it writes, and removes the namespace on every exit path. The inner
// run starts l4lb and the backends (-role chaos-backend) as its children,
// each killed with it.

// chaosOptions are the command line's.
type chaosOptions struct {
	Duration time.Duration
	Seed     uint64 // 0: from the clock
	Keep     bool   // keep the run directory (logs, config, report) even when it passes
	FailFast bool   // no fault run when the warm-up already failed
	L4lb     string // a prebuilt l4lb binary; "": go build ./cmd/l4lb
	Log      io.Writer
	// Signals, when not nil, interrupts the run (the inner run is stopped
	// and everything removed).
	Signals <-chan os.Signal
}

// chaosShortMax: runs up to this long use the short profile (sizes to a
// few MiB, faults every second or so).
const chaosShortMax = 2 * time.Minute

// chaosSpecFor derives the run's parameters from its duration.
func chaosSpecFor(o chaosOptions) chaosSpec {
	s := chaosSpec{
		Seed: o.Seed, Duration: o.Duration, HalfClose: 0.5, ResetShare: 0.08,
		MaxConns: int(o.Duration.Seconds()*3000) + 100,
		Readmit:  30 * time.Second,
	}
	if o.Duration <= chaosShortMax {
		s.Workers, s.MinSize, s.MaxSize = 12, 16, 4<<20
		s.HoldMin, s.HoldMax = 300*time.Millisecond, 1500*time.Millisecond
		s.GapMin, s.GapMax = 200*time.Millisecond, time.Second
		s.Stall, s.Settle = 20*time.Second, 20*time.Second
	} else {
		s.Workers, s.MinSize, s.MaxSize = 24, 16, 40<<20
		s.HoldMin, s.HoldMax = 500*time.Millisecond, 3*time.Second
		s.GapMin, s.GapMax = 300*time.Millisecond, 2*time.Second
		s.Stall, s.Settle = 30*time.Second, 30*time.Second
	}
	s.RSSTolKB = 16 << 10
	return s
}

// chaosPrereq says why the scenario cannot run here ("" when it can).
func chaosPrereq() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespace, nftables, packet socket)"
	}
	for _, tool := range []string{"ip", "nft", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("needs %s in PATH (apt-get install iproute2 nftables)", tool)
		}
	}
	return ""
}

const chaosNSPrefix = "l4lbchaos-"

// removeStaleNamespaces deletes namespaces an earlier run left behind
// (its process was killed outright): a run's are named prefix + its pid,
// then "-" and more or nothing. who names the run in the log line.
func removeStaleNamespaces(log io.Writer, prefix, who string) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(f[0], prefix), "-", 2)[0])
		if err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			continue // its run is alive
		}
		if exec.Command("ip", "netns", "del", f[0]).Run() == nil {
			fmt.Fprintf(log, "%s: removed stale namespace %s\n", who, f[0])
		}
	}
}

// runChaos runs the scenario and returns its report and the run directory
// (kept when the run failed or o.Keep). The error is for a run that could
// not be carried out; violations are in the report.
func runChaos(o chaosOptions) (*chaosReport, string, error) {
	log := o.Log
	if log == nil {
		log = os.Stderr
	}
	if why := chaosPrereq(); why != "" {
		return nil, "", errors.New(why)
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	removeStaleNamespaces(log, chaosNSPrefix, "chaos")
	dir, err := os.MkdirTemp("", "l4lb-chaos-")
	if err != nil {
		return nil, "", err
	}
	keep := o.Keep
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	var bin string
	if o.L4lb != "" {
		if bin, err = filepath.Abs(o.L4lb); err != nil {
			return nil, "", err
		}
	} else {
		fmt.Fprintf(log, "chaos: building l4lb\n")
		if bin, err = buildL4lb(dir); err != nil {
			return nil, "", err
		}
	}

	ns := chaosNSPrefix + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("ip netns add %s: %v: %s", ns, err, out)
	}
	defer func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			fmt.Fprintf(log, "chaos: ip netns del %s: %v: %s\n", ns, err, out)
		}
	}()
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("lo up in %s: %v: %s", ns, err, out)
	}

	spec := chaosSpecFor(o)
	spec.FailFast = o.FailFast
	spec.Dir, spec.L4lb, spec.Self, spec.Report = dir, bin, self, filepath.Join(dir, "report.json")
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, "", err
	}
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return nil, "", err
	}
	fmt.Fprintf(log, "chaos: namespace %s, %v of load, seed %d, run directory %s\n", ns, o.Duration, spec.Seed, dir)
	cmd := exec.Command("ip", "netns", "exec", ns, self, "-role", "chaos-inner", "-spec", specPath)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var innerErr error
	select {
	case innerErr = <-done:
	case s := <-o.Signals:
		fmt.Fprintf(log, "chaos: %v: stopping the run\n", s)
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		return nil, "", fmt.Errorf("interrupted by %v", s)
	}
	var rep *chaosReport
	if rb, err := os.ReadFile(spec.Report); err == nil {
		rep = &chaosReport{}
		if err := json.Unmarshal(rb, rep); err != nil {
			return nil, "", fmt.Errorf("report: %w", err)
		}
	}
	if rep == nil || !rep.Passed || innerErr != nil {
		keep = true
	}
	kept := ""
	if keep {
		kept = dir
	}
	if innerErr != nil {
		return rep, kept, fmt.Errorf("chaos run: %v", innerErr)
	}
	if rep == nil {
		return nil, kept, errors.New("chaos run wrote no report")
	}
	return rep, kept, nil
}

// chaosMain is `go run ./bench -scenario chaos`: the text report on
// stdout, the JSON to jsonPath; exit status 1 on any violation.
func chaosMain(opts options, stdout, log io.Writer) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	rep, dir, err := runChaos(chaosOptions{Duration: opts.chaosDuration, Seed: opts.seed, Keep: opts.keep, Log: log, Signals: sigs, L4lb: opts.chaosL4lb})
	if rep != nil {
		io.WriteString(stdout, renderChaos(rep))
		if opts.jsonPath != "" {
			if b, jerr := json.MarshalIndent(rep, "", " "); jerr == nil {
				if werr := os.WriteFile(opts.jsonPath, b, 0o644); werr != nil {
					fmt.Fprintln(log, "bench:", werr)
				}
			}
		}
	}
	if dir != "" {
		fmt.Fprintf(log, "chaos: run directory kept: %s (l4lb.log, backend-*.log, backend-*.events, report.json)\n", dir)
	}
	if err != nil {
		fmt.Fprintln(log, "bench:", err)
		return 1
	}
	if !rep.Passed {
		fmt.Fprintf(log, "bench: chaos: FAILED with %d violation(s)\n", rep.ViolationCount)
		return 1
	}
	return 0
}
