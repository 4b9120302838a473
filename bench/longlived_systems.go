package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The systems of the longlived scenario: each proxy runs as K instances
// (one per listener address, N/K connections each, since one process
// holds at most RLIMIT_NOFILE descriptors), each instance its product's
// ordinary unit: an l4lb process, an HAProxy master with one worker, an
// nginx master with one worker; and how each is upgraded or reloaded.

// llInstance is one running proxy instance.
type llInstance struct {
	listen string // IP:PORT
	dir    string
	proc   *child
}

// pids is the instance's process tree now.
func (in *llInstance) pids() []int {
	if in.proc == nil {
		return nil
	}
	if !in.proc.alive() {
		// l4lb after an upgrade: the process its pid file names.
		if pid, err := readPidfile(filepath.Join(in.dir, "l4lb.pid")); err == nil {
			return procTree(pid)
		}
		return nil
	}
	return procTree(in.proc.pid)
}

func readPidfile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// llSystemSpec is a system of the longlived scenario.
type llSystemSpec struct {
	name  string
	kind  Kind
	about string
	// prepare says why the system cannot run here; nil: nothing to check.
	prepare func(r *llRunner) error
	// start runs instance in (nil for direct).
	start func(r *llRunner, in *llInstance) (*child, error)
	// reload upgrades (l4lb) or reloads (the peers) in and returns the
	// processes whose exit ends it: the old process or worker.
	reload func(in *llInstance) ([]int, error)
	// accessLog: each instance writes a JSON access log to llAccessFile
	// in its directory, whose interim lines the idle window counts.
	accessLog bool
}

func llSystemCatalog() []llSystemSpec {
	return []llSystemSpec{
		{name: "direct", kind: KindDirect, about: "no proxy: clients connect to the backends"},
		{name: "l4lb", kind: KindSubject, prepare: llPrepareL4lb, start: llStartL4lb, reload: llUpgradeL4lb,
			about: fmt.Sprintf("l4lb from this tree, event_loops = 1, max_connections = %d per instance, shutdown_timeout = %q; upgrade: SIGUSR2", llShardCap, llShutdownTimeout)},
		{name: "l4lb-nobreaker", kind: KindSubject, prepare: llPrepareL4lb, start: llStartL4lbWith(llNoBreaker), reload: llUpgradeL4lb,
			about: "l4lb as above with the breaker out of the way ([pool.ws.breaker] failures = 1000000), to tell the breaker's part in a storm (opt-in)"},
		{name: sysL4lbLog, kind: KindSubject, prepare: llPrepareL4lb, start: llStartL4lbLogging(""), reload: llUpgradeL4lb, accessLog: true,
			about: "l4lb as above with [log] access = \"json\" to a file in its run directory, access_interval off: the baseline of l4lb-interim (opt-in)"},
		{name: sysL4lbInterim, kind: KindSubject, prepare: llPrepareL4lb, start: llStartL4lbLogging(llInterimEvery), reload: llUpgradeL4lb, accessLog: true,
			about: fmt.Sprintf("l4lb-log with access_interval = %q: an interim line per connection per second (opt-in)", llInterimEvery)},
		{name: "haproxy", kind: KindPeer, prepare: llPrepareTool("haproxy"), start: llStartHAProxy, reload: llReloadMaster(syscall.SIGUSR2),
			about: "HAProxy master-worker (-W), nbthread 1, mode tcp, no splice (64-byte messages); reload: SIGUSR2 to the master, the old worker soft-stops"},
		{name: "nginx", kind: KindPeer, prepare: llPrepareNginx, start: llStartNginx, reload: llReloadMaster(syscall.SIGHUP),
			about: "nginx stream, worker_processes 1, proxy_timeout 1h; reload: SIGHUP, the old worker shuts down gracefully"},
	}
}

const (
	// llShardCap is the most connections one proxy instance is given: two
	// descriptors each, inside RLIMIT_NOFILE 20000 with l4lb's reserve
	// (pkg/server/budget.go) and a margin for HAProxy's and nginx's own.
	llShardCap        = 9000
	llShutdownTimeout = "20s"
	llPort            = 8000 // every instance listens on its own address, this port
	llBackendPort     = 9000
)

func llPrepareTool(name string) func(*llRunner) error {
	return func(*llRunner) error {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("%s not installed (%s)", name, installHint)
		}
		return nil
	}
}

func llPrepareNginx(r *llRunner) error {
	if err := llPrepareTool("nginx")(r); err != nil {
		return err
	}
	if _, err := os.Stat(nginxStreamModule); err != nil {
		out, _ := exec.Command("nginx", "-V").CombinedOutput()
		if !strings.Contains(string(out), "--with-stream") || strings.Contains(string(out), "--with-stream=dynamic") {
			return fmt.Errorf("nginx stream module missing (%s)", installHint)
		}
	}
	return nil
}

func llPrepareL4lb(r *llRunner) error {
	_, err := r.l4lbBinary()
	return err
}

// llNoBreaker keeps l4lb's breaker from ever tripping within a run.
const llNoBreaker = "\n[pool.ws.breaker]\nfailures = 1000000\n"

// llL4lbConfig is one l4lb instance: one listener, round robin over the
// backends, no health checks (the storm is about what clients see, and a
// check would dial too), the breaker at its defaults unless more (TOML
// appended) says otherwise.
func llL4lbConfig(listen string, backends []string, more string) string {
	return llL4lbConfigLog(listen, backends, more, "")
}

// llL4lbConfigLog is llL4lbConfig with logKeys added to its [log].
func llL4lbConfigLog(listen string, backends []string, more, logKeys string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\nevent_loops = 1\nmax_connections = %d\nshutdown_timeout = %q\n\n", llShardCap, llShutdownTimeout)
	b.WriteString("[admin]\nlisten = \"\"\n\n[log]\nlevel = \"info\"\n" + logKeys + "\n")
	fmt.Fprintf(&b, "[[listener]]\nname = \"ws\"\nbind = %q\nprotocol = \"tcp\"\npool = \"ws\"\n\n", listen)
	b.WriteString("[pool.ws]\nalgorithm = \"round-robin\"\nidle_timeout = \"1h\"\n")
	for _, be := range backends {
		fmt.Fprintf(&b, "\n[[pool.ws.backend]]\naddr = %q\n", be)
	}
	b.WriteString("\n[pool.ws.health]\nenabled = false\n" + more)
	return b.String()
}

func llHAProxyConfig(listen string, backends []string, limit uint64) string {
	maxconn := min(haproxyMaxconn(limit, 0), llShardCap+500)
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    nbthread 1\n    maxconn %d\n\n", maxconn)
	fmt.Fprintf(&b, "defaults\n    mode tcp\n    maxconn %d\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n\n", maxconn)
	fmt.Fprintf(&b, "listen ws\n    bind %s\n    balance roundrobin\n", listen)
	for i, be := range backends {
		fmt.Fprintf(&b, "    server s%d %s\n", i, be)
	}
	return b.String()
}

func llNginxConfig(listen string, backends []string, limit uint64, dir, module string) string {
	var b strings.Builder
	if module != "" {
		fmt.Fprintf(&b, "load_module %s;\n", module)
	}
	fmt.Fprintf(&b, "worker_processes 1;\nworker_rlimit_nofile %d;\ndaemon off;\n", limit)
	fmt.Fprintf(&b, "pid %s/nginx.pid;\nerror_log %s/nginx.err warn;\n\n", dir, dir)
	fmt.Fprintf(&b, "events { worker_connections %d; }\n\nstream {\n    upstream ws {\n", nginxWorkerConnections(limit))
	for _, be := range backends {
		fmt.Fprintf(&b, "        server %s;\n", be)
	}
	fmt.Fprintf(&b, "    }\n    server { listen %s; proxy_pass ws; proxy_timeout 1h; }\n}\n", listen)
	return b.String()
}

func llStartL4lb(r *llRunner, in *llInstance) (*child, error) { return llStartL4lbWith("")(r, in) }

// llStartL4lbWith starts an l4lb instance whose config has more appended.
func llStartL4lbWith(more string) func(r *llRunner, in *llInstance) (*child, error) {
	return llStartL4lbLog(more, nil)
}

// llStartL4lbLog is llStartL4lbWith with logKeys(the instance's
// directory) in the config's [log] (nil: none).
func llStartL4lbLog(more string, logKeys func(dir string) string) func(r *llRunner, in *llInstance) (*child, error) {
	return func(r *llRunner, in *llInstance) (*child, error) {
		bin, err := r.l4lbBinary()
		if err != nil {
			return nil, err
		}
		keys := ""
		if logKeys != nil {
			keys = logKeys(in.dir)
		}
		cfg := filepath.Join(in.dir, "l4lb.toml")
		if err := os.WriteFile(cfg, []byte(llL4lbConfigLog(in.listen, r.backendAddrs(), more, keys)), 0o644); err != nil {
			return nil, err
		}
		return r.startProxy(in, "l4lb", bin, "run", "-config", cfg, "-pidfile", filepath.Join(in.dir, "l4lb.pid"))
	}
}

func llStartHAProxy(r *llRunner, in *llInstance) (*child, error) {
	cfg := filepath.Join(in.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(llHAProxyConfig(in.listen, r.backendAddrs(), r.limit)), 0o644); err != nil {
		return nil, err
	}
	return r.startProxy(in, "haproxy", "haproxy", "-W", "-db", "-f", cfg)
}

func llStartNginx(r *llRunner, in *llInstance) (*child, error) {
	module := ""
	if _, err := os.Stat(nginxStreamModule); err == nil {
		module = nginxStreamModule
	}
	cfg := filepath.Join(in.dir, "nginx.conf")
	if err := os.WriteFile(cfg, []byte(llNginxConfig(in.listen, r.backendAddrs(), r.limit, in.dir, module)), 0o644); err != nil {
		return nil, err
	}
	return r.startProxy(in, "nginx", "nginx", "-p", in.dir, "-c", cfg, "-e", filepath.Join(in.dir, "nginx.err"))
}

// llUpgradeL4lb sends SIGUSR2: the old process starts its successor,
// hands it the listeners (and, with issue 27, the connections), and
// exits once it holds none.
func llUpgradeL4lb(in *llInstance) ([]int, error) {
	if err := syscall.Kill(in.proc.pid, syscall.SIGUSR2); err != nil {
		return nil, err
	}
	return []int{in.proc.pid}, nil
}

// llReloadMaster signals the master (HAProxy SIGUSR2 in master-worker
// mode, nginx SIGHUP) and returns its workers of before the reload.
func llReloadMaster(sig syscall.Signal) func(in *llInstance) ([]int, error) {
	return func(in *llInstance) ([]int, error) {
		old := procTree(in.proc.pid)[1:]
		if len(old) == 0 {
			return nil, fmt.Errorf("%s: no worker to replace", in.proc.name)
		}
		if err := syscall.Kill(in.proc.pid, sig); err != nil {
			return nil, err
		}
		return old, nil
	}
}
