package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The longlived scenario (-scenario longlived, alone, as root): N
// long-lived WebSocket-like connections held through each system in turn,
// in network namespaces of its own (longlived_netns.go), with a
// reconnect storm and an upgrade or reload at the end; its tables go to
// the report as "longlived" and "storm" (longlived_report.go).

// llOptions are the scenario's knobs, from the flags.
type llOptions struct {
	conns    []int // N of each run, in order
	shards   int   // proxy instances; 0: as RLIMIT_NOFILE requires
	systems  []string
	appendTo string // splice the section into this file instead of stdout
}

const (
	llClientCap    = 16000 // connections per client process (1 fd each)
	llBackendCap   = 12500 // connections per backend process
	llOpenInflight = 256   // dials in flight over all clients while opening
	llMaxMsgRate   = 5000  // messages per second over all connections
	llMinPeriod    = 5 * time.Second
	llIdleWindow   = 5 * time.Second
	llSettle       = 2 * time.Second
	llCheckRate    = 20000 // check messages per second over all clients
	llStormBound   = 90 * time.Second
)

// llPlan is what one run's N implies.
type llPlan struct {
	n, shards, clients, backends int
	period, window               time.Duration
	upgradeWait                  time.Duration
}

// planLL sizes a run of n connections: K proxy instances of at most
// llShardCap, client and backend processes within their caps, and a
// message interval that keeps the aggregate under llMaxMsgRate.
func planLL(n, shards int) llPlan {
	p := llPlan{n: n, shards: shards}
	if p.shards <= 0 {
		p.shards = (n + llShardCap - 1) / llShardCap
	}
	p.clients = (n + llClientCap - 1) / llClientCap
	p.backends = (n + llBackendCap - 1) / llBackendCap
	p.period = max(llMinPeriod, time.Duration(float64(n)/llMaxMsgRate*float64(time.Second)))
	p.window = max(10*time.Second, p.period)
	st, _ := time.ParseDuration(llShutdownTimeout)
	p.upgradeWait = st + 15*time.Second
	return p
}

// llRunner is one longlived run: its directory, build and current system.
type llRunner struct {
	sup    *supervisor
	dir    string
	self   string
	limit  uint64
	layout cpuLayout
	log    io.Writer
	build  l4lbBuild
	plan   llPlan
	topo   *llTopology
	bes    []*child
}

func (r *llRunner) logf(format string, args ...any) { fmt.Fprintf(r.log, format+"\n", args...) }

func (r *llRunner) l4lbBinary() (string, error) {
	r.build.once.Do(func() { r.build.path, r.build.err = buildL4lb(r.dir) })
	return r.build.path, r.build.err
}

func (r *llRunner) backendAddrs() []string {
	var out []string
	for _, ip := range r.topo.backendIPs {
		out = append(out, ip+":"+strconv.Itoa(llBackendPort))
	}
	return out
}

// startProxy runs argv in the lb namespace for instance in and waits
// until it listens.
func (r *llRunner) startProxy(in *llInstance, name, path string, args ...string) (*child, error) {
	argv := inNS(r.topo.lb, append([]string{path}, args...)...)
	c, err := r.sup.start(spawnSpec{name: name, path: argv[0], args: argv[1:], logPath: filepath.Join(in.dir, name+".log")})
	if err != nil {
		return nil, err
	}
	if err := waitListening(c, in.listen); err != nil {
		r.sup.stop(c)
		return nil, fmt.Errorf("%w (see %s)", err, filepath.Join(in.dir, name+".log"))
	}
	return c, nil
}

// startBackends runs the backend processes in the srv namespace, all at
// once (a storm restarts them together).
func (r *llRunner) startBackends() error {
	addrs := r.backendAddrs()
	r.bes = make([]*child, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			argv := inNS(r.topo.srv, r.self, "-role", "llbackend", "-listen", addr)
			c, err := r.sup.start(spawnSpec{name: "llbackend-" + strconv.Itoa(i), path: argv[0], args: argv[1:], waitReady: true,
				logPath: filepath.Join(r.dir, fmt.Sprintf("backend-%d.log", i))})
			if err != nil {
				errs[i] = err
				return
			}
			if err := pinProcs([]int{c.pid}, r.layout.backends); err != nil {
				r.logf("warning: %v", err)
			}
			r.bes[i] = c
		})
	}
	wg.Wait()
	r.bes = slices.DeleteFunc(r.bes, func(c *child) bool { return c == nil })
	return errors.Join(errs...)
}

func longlivedMain(o options, lo llOptions, stdout, log io.Writer) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(log, "bench: longlived needs root (network namespaces)")
		return 1
	}
	for _, tool := range []string{"ip", "nstat", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(log, "bench: longlived needs %s (apt-get install iproute2 procps)\n", tool)
			return 1
		}
	}
	removeStaleNamespaces(log, llNSPrefix, "longlived")
	dir, err := os.MkdirTemp("", "l4lb-longlived-")
	if err != nil {
		fmt.Fprintln(log, "bench:", err)
		return 1
	}
	_ = os.Chmod(dir, 0o755)
	r := &llRunner{sup: newSupervisor(), dir: dir, limit: nofileLimit(), layout: planLayout(runtime.NumCPU(), o.pin), log: log}
	defer func() {
		r.sup.stopAll()
		if r.topo != nil {
			r.topo.remove(log)
		}
		if o.keep {
			r.logf("run directory kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	if r.self, err = copySelf(dir); err != nil {
		fmt.Fprintln(log, "bench:", err)
		return 1
	}
	if err := pinSelf(r.layout.loadgen); err != nil {
		r.logf("warning: %v", err)
	}
	var sections []llSection
	for _, n := range lo.conns {
		sec := r.runN(n, lo)
		sections = append(sections, sec)
		if lo.appendTo != "" {
			if err := appendLLSection(lo.appendTo, sec); err != nil {
				fmt.Fprintln(log, "bench:", err)
				return 1
			}
		}
	}
	if lo.appendTo == "" {
		for _, sec := range sections {
			io.WriteString(stdout, renderLLSection(sec))
		}
	}
	return 0
}

// runN runs every system at n connections.
func (r *llRunner) runN(n int, lo llOptions) llSection {
	r.plan = planLL(n, lo.shards)
	p := r.plan
	r.logf("longlived: N=%d: %d proxy instances, %d client and %d backend processes, a message every %v per connection (%v window), RLIMIT_NOFILE %d",
		n, p.shards, p.clients, p.backends, p.period, p.window, r.limit)
	sec := llSection{plan: p, meta: r.meta(), ll: newLLResult("longlived", n), storm: newStormResult(n)}
	baseline := socketsUsed()
	for _, spec := range llSystemCatalog() {
		if !slices.Contains(lo.systems, spec.name) {
			continue
		}
		r.waitSocketsFreed(baseline, time.Minute)
		if spec.prepare != nil {
			if err := spec.prepare(r); err != nil {
				sec.skipped = append(sec.skipped, fmt.Sprintf("%s: skipped: %v", spec.name, err))
				r.logf("longlived: %s: skipped: %v", spec.name, err)
				continue
			}
		}
		sec.about = append(sec.about, spec.name+": "+spec.about)
		steal0 := stealTicks()
		llv, stv, notes, err := r.runSystem(spec)
		steal := stealTicks() - steal0
		if err != nil {
			r.logf("longlived: %s: %v", spec.name, err)
		}
		sec.ll.add(spec.name, spec.kind, llv.vals, steal, err)
		if llv.outlived {
			sec.ll.markLowerBound(spec.name, "upgrade_s")
		}
		sec.storm.add(spec.name, spec.kind, stv, steal, nil)
		sec.ll.Notes = append(sec.ll.Notes, notes...)
	}
	finishLL(sec.ll)
	if note, ok := interimNote(sec.ll, n); ok {
		sec.ll.Notes = append(sec.ll.Notes, note)
	}
	finishStorm(sec.storm)
	return sec
}

func (r *llRunner) meta() []string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	p := r.plan
	return []string{
		fmt.Sprintf("date %s, kernel %s, %d CPUs, RLIMIT_NOFILE %d", time.Now().UTC().Format(time.RFC3339), rel, runtime.NumCPU(), r.limit),
		fmt.Sprintf("N = %d connections; each proxy as %d instances of at most %d connections (one process holds at most RLIMIT_NOFILE descriptors, two per connection); %d client and %d backend processes",
			p.n, p.shards, llShardCap, p.clients, p.backends),
		fmt.Sprintf("a 64-byte message every %v per connection (%.0f/s over all), round trips sampled over a %v window; idle CPU over %v with no message",
			p.period, float64(p.n)/p.period.Seconds(), p.window, llIdleWindow),
		"CPU placement: " + r.layout.String(),
	}
}

// startClients runs the client processes, connection numbers split
// evenly, each spreading its connections over targets and client addresses.
func (r *llRunner) startClients(targets []string) ([]*llClientProc, error) {
	p := r.plan
	var out []*llClientProc
	per := (p.n + p.clients - 1) / p.clients
	for i, first := 0, 0; first < p.n; i, first = i+1, first+per {
		count := min(per, p.n-first)
		args := []string{"-targets", strings.Join(targets, ","), "-sources", strings.Join(r.topo.clientIPs, ","),
			"-first", strconv.Itoa(first), "-count", strconv.Itoa(count), "-inflight", strconv.Itoa(max(1, llOpenInflight/p.clients))}
		c, err := startLLClient(r.topo.cli, r.self, filepath.Join(r.dir, fmt.Sprintf("client-%d.log", i)), args)
		if err != nil {
			return out, err
		}
		out = append(out, c)
		if err := pinProcs([]int{c.cmd.Process.Pid}, r.layout.loadgen); err != nil {
			r.logf("warning: %v", err)
		}
	}
	return out, nil
}

// socketsUsed is the kernel's count of sockets in use, system-wide.
func socketsUsed() uint64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	n, _ := parseSockstatUsed(b)
	return n
}

// waitSocketsFreed waits until the kernel has freed the sockets of the
// system before (a deleted namespace's are freed by a kernel worker, in
// the background, over seconds at 100,000), so that work does not land
// in the next system's figures; at most within.
func (r *llRunner) waitSocketsFreed(baseline uint64, within time.Duration) {
	t0 := time.Now()
	for time.Since(t0) < within && socketsUsed() > baseline+2000 {
		time.Sleep(250 * time.Millisecond)
	}
	r.logf("longlived: sockets in use %d (%d at the start), after waiting %.1fs", socketsUsed(), baseline, time.Since(t0).Seconds())
}

// settleSlab waits until the kernel's slab in use holds still (what an
// earlier system freed is freed), at most within.
func settleSlab(within time.Duration) {
	deadline := time.Now().Add(within)
	prev := slabKB()
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		cur := slabKB()
		if d := cur - prev; d < 512 && d > -512 {
			return
		}
		prev = cur
	}
}

// sockMemKB is the TCP socket buffer memory in use, system-wide.
func sockMemKB() float64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	pages, _ := parseSockstatTCPMem(b)
	return float64(pages) * float64(os.Getpagesize()) / 1024
}

// pidGone reports whether pid has exited (gone, or a zombie).
func pidGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}
