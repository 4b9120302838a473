package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// harness is one run: its temp dir, children, CPU layout and systems.
type harness struct {
	opts options
	sup  *supervisor
	dir  string // temp dir, world-readable so -user can exec from it
	self string // copy of the harness binary, for the child roles
	cred *syscall.Credential
	ncpu int
	// threads is nbthread / worker_processes / GOMAXPROCS for every proxy,
	// so none runs more threads than CPUs it may use.
	threads int
	limit   uint64
	layout  cpuLayout
	log     io.Writer
	l4lb    l4lbBuild
	base    l4lbBuild // -baseline's copy (l4lb_baseline.go)

	backends *child // the shared sink + echo process (and the UDP ones)
	redis    *child // redis-server, when the redis scenario runs
	redisErr error  // why redis is nil
	// udp: the udp scenario runs, so the backends serve UDP too and the
	// systems get UDP routes; udpCount is the UDP sink's datagram count
	// (mapped until the process exits: a load generator may still read it
	// while a signal tears the run down).
	udp      bool
	udpCount *udpCounter
	// sni: the sni scenario runs, so the backends serve TLS echos with
	// sniCert and the systems that can get an sni listener.
	sni     bool
	sniCert sniCert
	systems []*system
	skipped []string
}

func newHarness(opts options, log io.Writer) (*harness, error) {
	h := &harness{opts: opts, sup: newSupervisor(), log: log, ncpu: runtime.NumCPU(), limit: nofileLimit(),
		udp: slices.Contains(opts.scenarios, "udp"), sni: slices.Contains(opts.scenarios, "sni")}
	h.layout = planLayout(h.ncpu, opts.pin)
	h.threads = opts.threads
	if h.threads <= 0 {
		h.threads = len(h.layout.proxy)
	}
	dir, err := os.MkdirTemp("", "l4lb-bench-")
	if err != nil {
		return nil, err
	}
	h.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if opts.user != "" {
		if h.cred, err = lookupCred(opts.user); err != nil {
			return nil, err
		}
	}
	if h.self, err = copySelf(dir); err != nil {
		return nil, err
	}
	return h, nil
}

func lookupCred(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("-user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// copySelf puts the harness binary where an unprivileged user can run it
// (go run builds into a private directory).
func copySelf(dir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	src, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst := filepath.Join(dir, "bench-self")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return "", err
	}
	return dst, f.Close()
}

// goEnv is the environment for Go proxies; a spec's own env comes after it
// and wins (exec keeps the last of duplicate keys).
func (h *harness) goEnv(extra []string) []string {
	return append([]string{"GOMAXPROCS=" + strconv.Itoa(h.threads)}, extra...)
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.log, format+"\n", args...)
}

// startBackend runs one backend role process.
func (h *harness) startBackend(name string, args ...string) (*child, error) {
	c, err := h.sup.start(spawnSpec{
		name: name, path: h.self, args: append([]string{"-role", "backend"}, args...),
		waitReady: true, logPath: filepath.Join(h.dir, name+".log"),
	})
	if err != nil {
		return nil, err
	}
	if err := pinProcs([]int{c.pid}, h.layout.backends); err != nil {
		h.logf("warning: %v", err)
	}
	return c, nil
}

func (h *harness) failoverBackendArgs(s *system, k int) []string {
	return []string{"-echo", s.route(routeFailover).backends[k], "-tag", strconv.Itoa(k + 1)}
}

// setUp starts the shared backends, then every selected system on its own
// ports; a system that cannot run is skipped with its reason.
func (h *harness) setUp(specs []systemSpec) error {
	if err := pinSelf(h.layout.loadgen); err != nil {
		h.logf("warning: %v", err)
	}
	args := []string{"-sink", loopAddr(sinkPort(h.opts.portBase)), "-echo", loopAddr(echoPort(h.opts.portBase))}
	if h.udp {
		path := filepath.Join(h.dir, "udp-sink.count")
		var err error
		if h.udpCount, err = createUDPCounter(path); err != nil {
			return err
		}
		args = append(args, "-udp-echo", loopAddr(udpEchoPort(h.opts.portBase)),
			"-udp-sink", loopAddr(udpSinkPort(h.opts.portBase)), "-udp-count", path)
	}
	if h.sni {
		var err error
		if h.sniCert, err = writeSNICert(h.dir); err != nil {
			return err
		}
		args = append(args, sniBackendArgs(h.opts.portBase, h.sniCert)...)
	}
	var err error
	h.backends, err = h.startBackend("backends", args...)
	if err != nil {
		return err
	}
	if slices.Contains(h.opts.scenarios, "redis") {
		h.startRedis()
	}
	for i, spec := range specs {
		s := placeSystem(spec, i, h.opts.portBase, h.udp)
		if h.sni && spec.noSNI == "" {
			placeSNI(s, h.opts.portBase)
		}
		s.dir = filepath.Join(h.dir, spec.name)
		if err := os.Mkdir(s.dir, 0o755); err != nil {
			return err
		}
		if h.cred != nil {
			_ = os.Chown(s.dir, int(h.cred.Uid), int(h.cred.Gid))
		}
		if spec.prepare != nil {
			if err := spec.prepare(h, s); err != nil {
				h.skip(spec.name, err)
				continue
			}
		}
		if err := h.startSystem(s); err != nil {
			h.skip(spec.name, err)
			continue
		}
		h.systems = append(h.systems, s)
	}
	return nil
}

func (h *harness) skip(name string, err error) {
	msg := fmt.Sprintf("%s: skipped: %v", name, err)
	h.skipped = append(h.skipped, msg)
	h.logf("%s", msg)
}

func (h *harness) startSystem(s *system) error {
	if !isProxy(s) {
		return nil // direct has no failover run
	}
	for k := range s.route(routeFailover).backends {
		c, err := h.startBackend(fmt.Sprintf("%s-failover-%d", s.spec.name, k), h.failoverBackendArgs(s, k)...)
		if err != nil {
			h.stopSystem(s)
			return err
		}
		s.failoverBackends = append(s.failoverBackends, c)
	}
	if s.spec.start == nil {
		return nil
	}
	c, err := s.spec.start(h, s)
	if err != nil {
		h.stopSystem(s)
		return err
	}
	s.proc = c
	return h.pinSystem(s)
}

func (h *harness) pinSystem(s *system) error {
	if err := pinProcs(s.pids(), h.layout.proxy); err != nil {
		h.logf("warning: %s: %v", s.spec.name, err)
	}
	return nil
}

func (h *harness) stopSystem(s *system) {
	for _, c := range s.failoverBackends {
		h.sup.stop(c)
	}
	h.sup.stop(s.proc)
}

// startAndWait starts an external proxy and waits until every TCP
// listener of s accepts and its UDP request/response route echoes a
// datagram, or the process dies.
func (h *harness) startAndWait(s *system, spec spawnSpec) (*child, error) {
	c, err := h.sup.start(spec)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range s.routes {
		// A one-way route has nothing to answer; the proxy binds it with
		// the others.
		if r.udp == udpOneWayMode || r.udp == udpNoReplyMode {
			continue
		}
		for {
			if !c.alive() {
				h.sup.stop(c)
				return nil, fmt.Errorf("exited: %v (see %s)", c.err, spec.logPath)
			}
			if r.udp == udpRRMode {
				err = udpEchoOnce(r.listen, 200*time.Millisecond)
			} else {
				var conn net.Conn
				if conn, err = net.DialTimeout("tcp4", r.listen, time.Second); err == nil {
					conn.Close()
				}
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				h.sup.stop(c)
				what := "not listening"
				if r.udp != udpNone {
					what = "relayed no UDP datagram"
				}
				return nil, fmt.Errorf("%s %s after 10s (see %s)", r.listen, what, spec.logPath)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// udpEchoOnce sends one datagram to addr and waits up to timeout for it
// to come back.
func udpEchoOnce(addr string, timeout time.Duration) error {
	if err := checkLoopback(addr); err != nil {
		return err
	}
	c, err := net.Dial("udp4", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	msg := []byte("l4lb-bench-probe")
	if _, err := c.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != string(msg) {
		return fmt.Errorf("udp probe: got %q back", buf[:n])
	}
	return nil
}

// tearDown stops every child and removes the temp dir unless -keep.
func (h *harness) tearDown() {
	h.sup.stopAll()
	if h.opts.keep {
		h.logf("run directory kept: %s", h.dir)
		return
	}
	_ = os.RemoveAll(h.dir)
}
