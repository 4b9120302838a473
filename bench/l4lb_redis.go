package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// sysL4lbRedis is l4lb keeping its breaker state and manual disables in a
// redis-server of its own ([cluster] store = "redis"), as one instance of
// a fleet would: beside l4lb (the memory store) in the conn scenario it
// prices the shared store per connection.
const sysL4lbRedis = "l4lb-redis"

// l4lbRedisSystem is l4lb with [cluster] store = "redis" on a redis-server
// the harness starts for it (no persistence, pinned with the backends: it
// stands for a server elsewhere). Opt-in: run it with -systems
// l4lb,l4lb-redis (and -scenario conn).
func l4lbRedisSystem() systemSpec {
	s := l4lbVariant(sysL4lbRedis, nil, ` and [cluster] store = "redis" on a redis-server of its own`, storeKeys)
	s.optIn = true
	prepare, start := s.prepare, s.start
	s.prepare = func(h *harness, sys *system) error {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return fmt.Errorf("redis-server not installed (%s)", redisHint)
		}
		return prepare(h, sys)
	}
	s.start = func(h *harness, sys *system) (*child, error) {
		if err := h.startStore(sys); err != nil {
			return nil, err
		}
		return start(h, sys)
	}
	return s
}

// storePort is system i's store: the last of the ten ports the plan keeps
// for its backends (the failover route uses the first three).
func storePort(base, sys int) int { return failoverBackendPort(base, sys, 9) }

// storeKeys are l4lb-redis's keys after [log]: they end that table and
// make [cluster], pointing at the system's redis-server (started before
// the config is written). [cluster]'s defaults otherwise: timeout 250ms,
// sync_interval 2s, key_prefix "l4lb:".
func storeKeys(s *system) string {
	storesMu.Lock()
	st := stores[s.spec.name]
	storesMu.Unlock()
	addr := "127.0.0.1:0" // no store: l4lb refuses the port, and says so
	if st != nil {
		addr = st.addr
	}
	return fmt.Sprintf("\n[cluster]\nstore = \"redis\"\nredis_url = \"redis://%s\"\ninstance = \"bench\"\n", addr)
}

// storeServer is the redis-server of one l4lb-redis system.
type storeServer struct {
	addr string
	proc *child
}

// stores are the running store servers by system name; storeRuns what
// each conn run cost them (storeNote). The harness runs one scenario at a
// time, but the signal handler may tear down meanwhile: a mutex.
var (
	storesMu  sync.Mutex
	stores    = map[string]*storeServer{}
	storeRuns = map[string][]storeRun{}
)

// storeRun is one conn run of a system with a store: the connections it
// made and what redis-server did meanwhile.
type storeRun struct {
	conns    int
	commands float64 // INFO stats total_commands_processed delta, less our own INFO
	cpuSec   float64 // redis-server's user + system CPU
}

// startStore runs s's redis-server (once: a restart of s reuses it) and
// waits until it answers.
func (h *harness) startStore(s *system) error {
	storesMu.Lock()
	_, running := stores[s.spec.name]
	storesMu.Unlock()
	if running {
		return nil
	}
	port := storePort(h.opts.portBase, s.index)
	addr := loopAddr(port)
	dir := s.file("redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logPath := s.file("redis-server.log")
	c, err := h.sup.start(spawnSpec{
		name: s.spec.name + "-redis-server", path: "redis-server",
		args: []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir,
			"--logfile", "", "--loglevel", "warning"},
		logPath: logPath,
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if !c.alive() {
			h.sup.stop(c)
			return fmt.Errorf("its redis-server exited: %v (see %s)", c.err, logPath)
		}
		if err = redisPing(addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.sup.stop(c)
			return fmt.Errorf("its redis-server is not answering on %s after 10s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := pinProcs([]int{c.pid}, h.layout.backends); err != nil {
		h.logf("warning: %s redis-server: %v", s.spec.name, err)
	}
	storesMu.Lock()
	stores[s.spec.name] = &storeServer{addr: addr, proc: c}
	storesMu.Unlock()
	h.logf("bench: %s: redis-server pid %d on %s", s.spec.name, c.pid, addr)
	return nil
}

// storeSample starts measuring s's store for one run; the returned func
// ends it for conns connections. Without a store both do nothing.
func storeSample(h *harness, s *system) func(conns int) {
	storesMu.Lock()
	st := stores[s.spec.name]
	storesMu.Unlock()
	if st == nil {
		return func(int) {}
	}
	cmd0, err0 := redisCommandsProcessed(st.addr)
	cpu0 := cpuSeconds([]int{st.proc.pid})
	return func(conns int) {
		cmd1, err1 := redisCommandsProcessed(st.addr)
		cpu := cpuSeconds([]int{st.proc.pid}) - cpu0
		if err0 != nil || err1 != nil {
			h.logf("warning: %s: INFO stats: %v %v", s.spec.name, err0, err1)
			return
		}
		r := storeRun{conns: conns, commands: cmd1 - cmd0 - 1, cpuSec: cpu} // -1: the first INFO counts itself
		storesMu.Lock()
		storeRuns[s.spec.name] = append(storeRuns[s.spec.name], r)
		storesMu.Unlock()
		h.logf("  conn     %s: its redis-server took %.0f commands (%.4f per conn) and %.0f ms CPU", s.spec.name,
			r.commands, r.commands/float64(max(conns, 1)), r.cpuSec*1000)
	}
}

// redisCommandsProcessed is the server's total_commands_processed (INFO
// stats), over a connection of its own.
func redisCommandsProcessed(addr string) (float64, error) {
	c, err := dialLoopback(addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	stats, err := testnet.RedisInfo(c, "stats")
	if err != nil {
		return 0, err
	}
	v, ok := stats["total_commands_processed"]
	if !ok {
		return 0, fmt.Errorf("INFO stats: no total_commands_processed")
	}
	return strconv.ParseFloat(v, 64)
}

// storeNote compares l4lb with the Redis store and with the memory store
// by their medians in one scenario (connection rate, CPU per connection),
// with what the store's redis-server did per connection.
func storeNote(sr *ScenarioResult) (string, bool) {
	var with, without bool
	for _, r := range sr.Rows {
		with = with || (r.System == sysL4lbRedis && r.NA == "")
		without = without || (r.System == "l4lb" && r.NA == "")
	}
	if !with || !without {
		return "", false
	}
	rateR, rateM := sr.summary(sysL4lbRedis, "conn_per_s").Median, sr.summary("l4lb", "conn_per_s").Median
	cpuR, cpuM := sr.summary(sysL4lbRedis, "cpu_us_per_conn").Median, sr.summary("l4lb", "cpu_us_per_conn").Median
	if math.IsNaN(rateR) || math.IsNaN(rateM) {
		return "", false
	}
	note := fmt.Sprintf("store cost (%s: l4lb with [cluster] store = \"redis\" on a local redis-server; medians): conn_per_s %s redis vs %s memory (%.2fx)",
		sysL4lbRedis, formatNum(rateR), formatNum(rateM), ratio(rateR, rateM))
	if !math.IsNaN(cpuR) && !math.IsNaN(cpuM) {
		note += fmt.Sprintf("; cpu_us_per_conn %s redis vs %s memory (%+.1f µs, %+.0f%%)",
			formatNum(cpuR), formatNum(cpuM), cpuR-cpuM, 100*(ratio(cpuR, cpuM)-1))
	}
	storesMu.Lock()
	runs := storeRuns[sysL4lbRedis]
	storesMu.Unlock()
	if len(runs) > 0 {
		var cmds, cpu []float64
		for _, r := range runs {
			if r.conns > 0 {
				cmds = append(cmds, r.commands/float64(r.conns))
				cpu = append(cpu, r.cpuSec*1e6/float64(r.conns))
			}
		}
		note += fmt.Sprintf("; the store's redis-server per connection: %s commands, %s µs CPU (not in cpu_us_per_conn)",
			formatSummary(summarize(cmds)), formatSummary(summarize(cpu)))
	}
	return note, true
}
