package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The redis scenario puts a client no one here wrote, redis-benchmark,
// against one redis-server through every system.

const (
	redisHint     = "apt-get install redis-server redis-tools"
	redisClients  = 50
	redisPipeline = 16
	// redisRate sizes -n: requests per second of run time for the plain
	// run (proxies do 15-30k GET/s here, so a test takes a few seconds);
	// the pipelined run gets redisPipeline times as many.
	redisRate = 20000
	// redisMaxTime bounds one redis-benchmark run: it spins forever on a
	// port that refuses, and a stalled proxy must not hang the harness.
	redisMaxTime = 90 * time.Second
)

// redisScenario: redis-benchmark -c 50 -t get,set, plain and -P 16,
// requests/s per system and the proxy's CPU per request.
type redisScenario struct{}

func (redisScenario) name() string { return "redis" }
func (redisScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "get_rps", Unit: "req/s", Better: HigherBetter, Chart: true},
		{Name: "set_rps", Unit: "req/s", Better: HigherBetter},
		{Name: "get_rps_p16", Unit: "req/s", Better: HigherBetter, Chart: true},
		{Name: "set_rps_p16", Unit: "req/s", Better: HigherBetter},
		// µs of proxy CPU per request = ms per 1000 requests.
		{Name: "cpu_us_per_req", Unit: "µs", Better: LowerBetter, Chart: true},
		{Name: "cpu_us_per_req_p16", Unit: "µs", Better: LowerBetter},
		// How often the proxy slept per request (see connScenario).
		{Name: "sleeps_per_req", Unit: "sleeps", Better: LowerBetter, NoRatio: true},
	}
}
func (redisScenario) rounds(o options) int      { return o.rounds }
func (redisScenario) applies(*system) bool      { return true }
func (redisScenario) finish(sr *ScenarioResult) {}

// unavailable: both redis-server (started by setUp) and redis-benchmark.
func (redisScenario) unavailable(h *harness) error {
	if h.redis == nil {
		if h.redisErr != nil {
			return h.redisErr
		}
		return errors.New("redis-server was not started")
	}
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		return fmt.Errorf("redis-benchmark not installed (%s)", redisHint)
	}
	return nil
}

// redisRequests is -n for the plain run (per test: GET and SET each).
func redisRequests(o options) int {
	return max(10000, int(o.runTime.Seconds()*redisRate))
}

func (redisScenario) run(h *harness, s *system) (map[string]float64, error) {
	out := map[string]float64{}
	addr := s.addr(routeRedis)
	for _, pipe := range []int{1, redisPipeline} {
		n := redisRequests(h.opts)
		suffix := ""
		if pipe > 1 {
			n *= pipe
			suffix = fmt.Sprintf("_p%d", pipe)
		}
		var res map[string]redisResult
		sleptBefore := voluntarySwitches(s.pids())
		cpu, err := measureCPU(s, func() error {
			var err error
			res, err = redisBenchmark(h, addr, n, pipe)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("-P %d: %w", pipe, err)
		}
		get, set := res["GET"], res["SET"]
		out["get_rps"+suffix] = get.rps
		out["set_rps"+suffix] = set.rps
		if isProxy(s) {
			out["cpu_us_per_req"+suffix] = cpu * 1e6 / float64(2*n)
			if pipe == 1 {
				slept := voluntarySwitches(s.pids()) - sleptBefore
				out["sleeps_per_req"] = float64(slept) / float64(2*n)
			}
		}
		h.logf("    redis %-8s -P %-2d n=%d: GET %.0f/s p50 %.3f ms p99 %.3f ms, SET %.0f/s p50 %.3f ms p99 %.3f ms",
			s.spec.name, pipe, n, get.rps, get.p50ms, get.p99ms, set.rps, set.p50ms, set.p99ms)
	}
	return out, nil
}

// redisBenchmark runs one redis-benchmark, pinned where the load generator
// runs, bounded in time, and returns its CSV lines by test name.
func redisBenchmark(h *harness, addr string, n, pipe int) (map[string]redisResult, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(addr, ":")
	// It would spin on a refusing port: check that something answers.
	if err := redisPing(addr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisMaxTime)
	defer cancel()
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(redisClients), "-n", strconv.Itoa(n),
		"-t", "get,set", "--csv", "-q"}
	if pipe > 1 {
		args = append(args, "-P", strconv.Itoa(pipe))
	}
	cmd := exec.CommandContext(ctx, "redis-benchmark", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// It inherits the harness thread's affinity already; pin it anyway,
	// as the load generator.
	if err := pinProcs([]int{cmd.Process.Pid}, h.layout.loadgen); err != nil {
		h.logf("warning: redis-benchmark: %v", err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("redis-benchmark killed after %v", redisMaxTime)
	}
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark: %v: %s", err, firstLine(stderr.String()))
	}
	res, err := parseRedisCSV(stdout.Bytes())
	if err != nil {
		return nil, err
	}
	for _, t := range []string{"GET", "SET"} {
		if r, ok := res[t]; !ok || r.rps <= 0 {
			return nil, fmt.Errorf("redis-benchmark: no %s result (stderr: %s)", t, firstLine(stderr.String()))
		}
	}
	return res, nil
}

// redisResult is one line of redis-benchmark --csv.
type redisResult struct {
	rps          float64
	p50ms, p99ms float64 // NaN where the CSV has no such column (redis < 7)
}

// parseRedisCSV reads redis-benchmark --csv output: redis 7 prints a header
// ("test","rps","avg_latency_ms",...,"p50_latency_ms",...) and one line
// per test; older versions print "TEST","rps" lines without a header.
func parseRedisCSV(b []byte) (map[string]redisResult, error) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	col := map[string]int{"test": 0, "rps": 1}
	out := map[string]redisResult{}
	for line := 0; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("redis-benchmark csv: %w", err)
		}
		if line == 0 && len(rec) > 0 && rec[0] == "test" {
			col = map[string]int{}
			for i, name := range rec {
				col[name] = i
			}
			if _, ok := col["rps"]; !ok {
				return nil, errors.New("redis-benchmark csv: header without rps")
			}
			continue
		}
		field := func(name string) float64 {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return math.NaN()
			}
			v, err := strconv.ParseFloat(rec[i], 64)
			if err != nil {
				return math.NaN()
			}
			return v
		}
		if len(rec) <= col["rps"] {
			continue
		}
		res := redisResult{rps: field("rps"), p50ms: field("p50_latency_ms"), p99ms: field("p99_latency_ms")}
		if math.IsNaN(res.rps) { // not a result line
			continue
		}
		out[rec[col["test"]]] = res
	}
	if len(out) == 0 {
		return nil, errors.New("redis-benchmark csv: no result line")
	}
	return out, nil
}

// redisPing sends PING and expects +PONG within 2 s.
func redisPing(addr string) error {
	c, err := dialLoopback(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("redis PING via %s: %w", addr, err)
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redis PING via %s: got %q", addr, strings.TrimSpace(line))
	}
	return nil
}

// startRedis runs the shared redis-server backend (no persistence) on the
// port plan's redis port, pinned with the other backends; the supervisor
// stops it by pid (its own process group) at teardown. A missing binary
// leaves h.redis nil and the reason in h.redisErr.
func (h *harness) startRedis() {
	if _, err := exec.LookPath("redis-server"); err != nil {
		h.redisErr = fmt.Errorf("redis-server not installed (%s)", redisHint)
		return
	}
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		h.redisErr = fmt.Errorf("redis-benchmark not installed (%s)", redisHint)
		return
	}
	dir := filepath.Join(h.dir, "redis")
	if err := os.Mkdir(dir, 0o755); err != nil {
		h.redisErr = err
		return
	}
	addr := loopAddr(redisPort(h.opts.portBase))
	c, err := h.sup.start(spawnSpec{
		name: "redis-server", path: "redis-server",
		args: []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(redisPort(h.opts.portBase)),
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir,
			"--logfile", "", "--loglevel", "warning", "--maxclients", "10000"},
		logPath: filepath.Join(h.dir, "redis-server.log"),
	})
	if err != nil {
		h.redisErr = err
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if !c.alive() {
			h.sup.stop(c)
			h.redisErr = fmt.Errorf("redis-server exited: %v (see %s)", c.err, filepath.Join(h.dir, "redis-server.log"))
			return
		}
		if err = redisPing(addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.sup.stop(c)
			h.redisErr = fmt.Errorf("redis-server not answering on %s after 10s: %v", addr, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := pinProcs([]int{c.pid}, h.layout.backends); err != nil {
		h.logf("warning: redis-server: %v", err)
	}
	h.redis = c
	h.logf("bench: redis-server pid %d on %s", c.pid, addr)
}
