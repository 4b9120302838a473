package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/handoff"
)

// buildVersioned builds l4lb into dir with version stamped in, once per
// test: the upgrade tests run real builds, as an operator would.
func buildVersioned(t *testing.T, dir, version string) string {
	t.Helper()
	out := filepath.Join(dir, "l4lb-"+version)
	if b, err := goBuild(out, "-ldflags=-X=main.version="+version); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// install puts the file src at path the way a package manager does: a new
// file renamed over the old one (the running process keeps its own).
func install(t *testing.T, src, path string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	installBytes(t, data, path, 0o755)
}

func installBytes(t *testing.T, data []byte, path string, mode os.FileMode) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// processGone reports whether pid has exited (gone, or a zombie nobody
// reaped yet: an upgraded l4lb is reparented when its parent exits).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

func fileSHA(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// loadStats are what the client load saw.
type loadStats struct {
	mu       sync.Mutex
	failures []string
	short    atomic.Int64 // short connections completed
	streams  atomic.Int64 // streams completed byte-exact
	udpOK    atomic.Int64
	udpRetry atomic.Int64 // datagrams sent again after no answer in time
	// disabled is set once backend b is disabled: a connection begun after
	// must never reach it.
	disabled atomic.Bool
}

func (s *loadStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, fmt.Sprintf(format, args...))
	} else if len(s.failures) == 20 {
		s.failures = append(s.failures, "...")
	}
}

func (s *loadStats) failed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

// shortClient opens connections one after another: tag, one line echoed.
func shortClient(addr string, st *loadStats, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		afterDisable := st.disabled.Load()
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			st.fail("short %d: dial: %v", i, err)
			continue
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		tag, err := r.ReadString('\n')
		msg := fmt.Sprintf("ping %d\n", i)
		if err == nil {
			_, err = io.WriteString(c, msg)
		}
		var echo string
		if err == nil {
			echo, err = r.ReadString('\n')
		}
		c.Close()
		switch {
		case err != nil:
			st.fail("short %d: %v (tag %q)", i, err, tag)
		case echo != msg:
			st.fail("short %d: echo %q, want %q", i, echo, msg)
		case afterDisable && tag == "b\n":
			st.fail("short %d: reached the disabled backend b", i)
		default:
			st.short.Add(1)
		}
	}
}

// streamClient relays long streams, one after another, each checked byte
// for byte; each lasts about a second, so streams span the hand-overs and
// old processes have open relays to drain.
func streamClient(addr string, seed uint64, st *loadStats, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		const chunk, chunks = 32 << 10, 40
		data := make([]byte, chunk*chunks)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			st.fail("stream %d/%d: dial: %v", seed, i, err)
			continue
		}
		c.SetDeadline(time.Now().Add(60 * time.Second))
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			st.fail("stream %d/%d: tag: %v", seed, i, err)
			c.Close()
			continue
		}
		werr := make(chan error, 1)
		go func() {
			for j := range chunks {
				if _, err := c.Write(data[j*chunk : (j+1)*chunk]); err != nil {
					werr <- err
					return
				}
				time.Sleep(25 * time.Millisecond)
			}
			werr <- c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(r)
		if werr := <-werr; err == nil {
			err = werr
		}
		c.Close()
		switch {
		case err != nil:
			st.fail("stream %d/%d: %v after %d of %d bytes", seed, i, err, len(got), len(data))
		case !bytes.Equal(got, data):
			st.fail("stream %d/%d: %d bytes back, want the %d sent, byte for byte", seed, i, len(got), len(data))
		default:
			st.streams.Add(1)
		}
	}
}

// udpClient asks one question after another from one port, each until
// answered: a datagram lost when an old process ends its sessions is
// sent again; a refusal (no socket on the port at that instant) fails.
func udpClientLoad(addr string, st *loadStats, stop <-chan struct{}) {
	ra, _ := net.ResolveUDPAddr("udp", addr)
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		st.fail("udp: %v", err)
		return
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		q := fmt.Sprintf("q-%d", i)
		answered := false
		for try := 0; try < 20 && !answered; try++ {
			if try > 0 {
				st.udpRetry.Add(1)
			}
			if _, err := c.Write([]byte(q)); err != nil {
				st.fail("udp %s: send: %v", q, err)
				return
			}
			deadline := time.Now().Add(300 * time.Millisecond)
			for !answered {
				c.SetReadDeadline(deadline)
				n, err := c.Read(buf)
				if err != nil {
					if errors.Is(err, syscall.ECONNREFUSED) {
						st.fail("udp %s: refused: no socket on the port", q)
						return
					}
					break // timed out: send again
				}
				answered = string(buf[:n]) == q // an earlier question's late answer is skipped
			}
		}
		if !answered {
			st.fail("udp %s: never answered", q)
			return
		}
		st.udpOK.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
}

type apiBackend struct {
	Addr     string `json:"addr"`
	Source   string `json:"source"`
	Usable   bool   `json:"usable"`
	Active   int64  `json:"active_connections"`
	Health   string `json:"health"`
	Disabled bool   `json:"disabled"`
	Weight   int    `json:"weight"`
	Role     string `json:"role"`
	Breaker  struct {
		State        string  `json:"state"`
		Generation   uint64  `json:"generation"`
		CooldownLeft float64 `json:"cooldown_left_seconds"`
	} `json:"breaker"`
}

// backends reads pool's backends from the admin API, by address.
func backends(t *testing.T, adminAddr, pool string) map[string]apiBackend {
	t.Helper()
	resp := e2eutil.AdminGet(t, "http://"+adminAddr+"/api/v1/pools")
	defer resp.Body.Close()
	var doc struct {
		Pools []struct {
			Name     string       `json:"name"`
			Backends []apiBackend `json:"backends"`
		} `json:"pools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc.Pools {
		if p.Name == pool {
			out := map[string]apiBackend{}
			for _, b := range p.Backends {
				out[b.Addr] = b
			}
			return out
		}
	}
	t.Fatalf("no pool %s in the API", pool)
	return nil
}

// upgradeConfig is the configuration of the test's l4lb generation gen:
// the "chk" pool checks every 100 ms at first, then every 10 minutes, so a
// process that did not get c's health from the one before would show c
// up; generations 2 and 3 have an extra listener.
type upgradeSetup struct {
	path                      string
	web, udp, extra, admin    string
	a, b, d, c, e, udpBackend string
	loops                     []int // event_loops by generation
}

func (u *upgradeSetup) write(t *testing.T, gen int) {
	t.Helper()
	loops := u.loops[gen%len(u.loops)]
	interval, timeout := "10m", "1s"
	if gen == 0 {
		interval, timeout = "100ms", "100ms"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[global]\nshutdown_timeout = \"30s\"\nevent_loops = %d\n", loops)
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n[log]\nlevel = \"info\"\n", u.admin)
	fmt.Fprintf(&b, "[[listener]]\nname = \"web\"\nbind = %q\npool = \"web\"\n", u.web)
	fmt.Fprintf(&b, "[[listener]]\nname = \"dns\"\nbind = %q\nprotocol = \"udp\"\npool = \"dns\"\n", u.udp)
	if gen == 2 || gen == 3 {
		fmt.Fprintf(&b, "[[listener]]\nname = \"extra\"\nbind = %q\npool = \"web\"\n", u.extra)
	}
	fmt.Fprintf(&b, `[pool.web]
retries = 2
[pool.web.health]
enabled = false
[pool.web.breaker]
failures = 2
window = "10m"
cooldown = "10m"
max_cooldown = "10m"
[[pool.web.backend]]
addr = %q
[[pool.web.backend]]
addr = %q
[[pool.web.backend]]
addr = %q
[pool.chk.health]
interval = %q
timeout = %q
rise = 1
fall = 1
[[pool.chk.backend]]
addr = %q
[[pool.chk.backend]]
addr = %q
[pool.dns]
[pool.dns.health]
enabled = false
[[pool.dns.backend]]
addr = %q
`, u.a, u.b, u.d, interval, timeout, u.c, u.e, u.udpBackend)
	installBytes(t, []byte(b.String()), u.path, 0o644)
}

// The binary upgrade under load, with the real binary: five upgrades in a
// row (new executables, a new configuration, event loops 2 -> 3 -> 1 -> 2
// ..., a listener added and removed) while clients open connections,
// stream bytes and send datagrams. No connection is refused or fails,
// every stream comes back byte for byte, no datagram is refused, each old
// process exits after its drain, and the state carries: a disabled
// backend stays disabled, a run-time weight stays, an open breaker stays open at its generation, a
// health-down backend stays down. Then three upgrades that must fail (a
// binary that exits 1, a bad configuration, a binary that never becomes
// ready) leave the old process serving.
func TestUpgradeUnderLoad(t *testing.T) {
	testnet.CheckLeaks(t)
	dir := t.TempDir()
	binA := buildVersioned(t, dir, "upgrade-a")
	binB := buildVersioned(t, dir, "upgrade-b")

	be := []*testnet.Backend{testnet.StartBackend(t, "a", ""), testnet.StartBackend(t, "b", ""), testnet.StartBackend(t, "e", "")}
	ub := testnet.StartUDPBackend(t, "u", "")
	u := &upgradeSetup{
		path: filepath.Join(dir, "l4lb.toml"),
		web:  testnet.FreeAddr(t), udp: testnet.FreeAddr(t), extra: testnet.FreeAddr(t), admin: testnet.FreeAddr(t),
		a: be[0].Addr, b: be[1].Addr, e: be[2].Addr, udpBackend: ub.Addr,
		d: testnet.FreeAddr(t), c: testnet.FreeAddr(t), // nothing listens: refused
		loops: []int{2, 2, 3, 1, 2, 3},
	}
	u.write(t, 0)
	bin := filepath.Join(dir, "l4lb")
	install(t, binA, bin)
	pidfile := filepath.Join(dir, "l4lb.pid")
	logFile, err := os.Create(filepath.Join(dir, "l4lb.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	readLog := func() string {
		b, _ := os.ReadFile(logFile.Name())
		return string(b)
	}

	// Every process of every generation is killed at the end, whatever
	// happened.
	var pidsMu sync.Mutex
	pids := map[int]bool{}
	t.Cleanup(func() {
		pidsMu.Lock()
		defer pidsMu.Unlock()
		for p := range pids {
			if !processGone(p) {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("l4lb log:\n%s", readLog())
		}
	})
	first := exec.Command(bin, "-config", u.path, "-pidfile", pidfile, "-upgrade-timeout", "3s")
	first.Stdout, first.Stderr = logFile, logFile // files: Wait does not wait for the successors
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	pids[first.Process.Pid] = true
	firstDone := make(chan struct{})
	go func() { first.Wait(); close(firstDone) }()
	defer func() { first.Process.Kill(); <-firstDone }()
	testnet.Eventually(t, "the pid file", func() bool {
		p, err := handoff.ReadPIDFile(pidfile)
		return err == nil && p == first.Process.Pid
	})

	// State to carry: d's breaker trips on refused client dials (retried
	// on a or b, so no client sees them), c goes health-down, b is
	// disabled by the operator.
	st := &loadStats{}
	stop := make(chan struct{})
	var load sync.WaitGroup
	for range 3 {
		load.Go(func() { shortClient(u.web, st, stop) })
	}
	for i := range 2 {
		load.Go(func() { streamClient(u.web, uint64(i+1), st, stop) })
	}
	load.Go(func() { udpClientLoad(u.udp, st, stop) })
	stopLoad := sync.OnceFunc(func() { close(stop); load.Wait() })
	defer stopLoad()

	testnet.Eventually(t, "d's breaker to trip and c to go down", func() bool {
		web, chk := backends(t, u.admin, "web"), backends(t, u.admin, "chk")
		return web[u.d].Breaker.State == "open" && chk[u.c].Health == "down"
	})
	resp, err := http.Post("http://"+u.admin+"/api/v1/pools/web/backends/"+u.b+"/disable", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("disable b: %v %v", resp, err)
	}
	resp.Body.Close()
	st.disabled.Store(true)
	// And a run-time weight, which no state file keeps here: the upgrade
	// hands it over itself.
	resp, err = http.Post("http://"+u.admin+"/api/v1/pools/web/backends/"+u.a+"/weight?value=5", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("weight a: %v %v", resp, err)
	}
	resp.Body.Close()
	checkState := func(when string) {
		t.Helper()
		web, chk := backends(t, u.admin, "web"), backends(t, u.admin, "chk")
		if b := web[u.b]; !b.Disabled {
			t.Fatalf("%s: b %+v, want still disabled", when, b)
		}
		if a := web[u.a]; a.Weight != 5 {
			t.Fatalf("%s: a %+v, want the operator's weight 5", when, a)
		}
		if d := web[u.d]; d.Breaker.State != "open" || d.Breaker.Generation != 1 || d.Breaker.CooldownLeft <= 0 || d.Breaker.CooldownLeft > 600 {
			t.Fatalf("%s: d %+v, want its breaker still open at generation 1 with its cooldown running", when, d)
		}
		if c := chk[u.c]; c.Health != "down" {
			t.Fatalf("%s: c %+v, want still health-down", when, c)
		}
		if e := chk[u.e]; e.Health != "up" {
			t.Fatalf("%s: e %+v, want up", when, e)
		}
	}
	checkState("before the upgrades")

	// l4lb upgrade only signals and watches the pid file: run from the
	// build, since the path may hold a broken binary.
	upgradeCmd := func() (string, int) {
		cmd := exec.Command(binA, "upgrade", "-pidfile", pidfile, "-wait", "60s")
		out, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("l4lb upgrade: %v", err)
			}
			code = ee.ExitCode()
		}
		return string(out), code
	}

	current := first.Process.Pid
	for gen := 1; gen <= 5; gen++ {
		next := binA
		if gen%2 == 1 {
			next = binB
		}
		install(t, next, bin)
		u.write(t, gen)
		streamsBefore := st.streams.Load()
		out, code := upgradeCmd()
		if code != 0 {
			t.Fatalf("upgrade %d: exit %d: %s", gen, code, out)
		}
		newPID, err := handoff.ReadPIDFile(pidfile)
		if err != nil || newPID == current {
			t.Fatalf("upgrade %d: pid file names %d (%v), want a new process; l4lb upgrade said %q", gen, newPID, err, out)
		}
		if want := fmt.Sprintf("upgraded: pid %d serves; pid %d hands its connections over", newPID, current); !strings.Contains(out, want) {
			t.Fatalf("upgrade %d: l4lb upgrade said %q, want %q", gen, out, want)
		}
		pidsMu.Lock()
		pids[newPID] = true
		pidsMu.Unlock()
		// The new process runs the file now at the path, re-read from disk.
		if got, want := fileSHA(t, fmt.Sprintf("/proc/%d/exe", newPID)), fileSHA(t, next); got != want {
			t.Fatalf("upgrade %d: the new process does not run the executable installed at %s", gen, bin)
		}
		// The old one drains (streams it holds finish) and exits.
		testnet.Eventually(t, fmt.Sprintf("old pid %d to exit after its drain", current), func() bool {
			return processGone(current)
		})
		if gen == 1 {
			<-firstDone
		}
		testnet.Eventually(t, "a stream to complete on the new process", func() bool {
			return st.streams.Load() > streamsBefore+1
		})
		checkState(fmt.Sprintf("after upgrade %d", gen))
		switch gen {
		case 2, 3:
			if tag, err := testnet.Hello(u.extra, ""); err != nil || tag != "a" {
				t.Fatalf("upgrade %d: the added listener: %q, %v", gen, tag, err)
			}
		case 4:
			if c, err := net.DialTimeout("tcp", u.extra, time.Second); err == nil {
				c.Close()
				t.Fatalf("upgrade %d: the removed listener still accepts", gen)
			}
		}
		if f := st.failed(); len(f) > 0 {
			t.Fatalf("upgrade %d: the load failed:\n%s", gen, strings.Join(f, "\n"))
		}
		current = newPID
	}

	// Upgrades that must fail, each leaving the old process serving.
	good := binA
	for _, tc := range []struct {
		name    string
		prepare func()
		restore func()
		logs    string
	}{
		{"a binary that exits 1",
			func() { installBytes(t, []byte("#!/bin/sh\necho broken build >&2\nexit 1\n"), bin, 0o755) },
			func() { install(t, good, bin) },
			"the new process exited before it was ready"},
		{"a bad configuration",
			func() {
				installBytes(t, []byte("[global]\nshutdown_timeout = \"soon\"\n"), u.path, 0o644)
			},
			func() { u.write(t, 5) },
			"the new process exited before it was ready"},
		{"a binary that never becomes ready",
			func() { installBytes(t, []byte("#!/bin/sh\nexec sleep 600\n"), bin, 0o755) },
			func() { install(t, good, bin) },
			"was not ready in time"},
	} {
		before := strings.Count(readLog(), tc.logs)
		tc.prepare()
		out, code := upgradeCmd()
		tc.restore()
		if code != 1 || !strings.Contains(out, fmt.Sprintf("failed: pid %d is still serving", current)) {
			t.Fatalf("%s: l4lb upgrade exit %d, %q; want 1 saying pid %d still serves", tc.name, code, out, current)
		}
		if p, _ := handoff.ReadPIDFile(pidfile); p != current || processGone(current) {
			t.Fatalf("%s: pid file %d, want %d still serving", tc.name, p, current)
		}
		if strings.Count(readLog(), tc.logs) <= before {
			t.Fatalf("%s: the log does not say %q", tc.name, tc.logs)
		}
		served := st.short.Load()
		testnet.Eventually(t, "clients still served", func() bool { return st.short.Load() > served+5 })
		checkState("after " + tc.name)
	}

	stopLoad()
	if f := st.failed(); len(f) > 0 {
		t.Fatalf("the load failed:\n%s", strings.Join(f, "\n"))
	}
	t.Logf("%d short connections, %d byte-exact streams, %d datagrams answered (%d sent again) across 5 upgrades and 3 failed ones",
		st.short.Load(), st.streams.Load(), st.udpOK.Load(), st.udpRetry.Load())
	log := readLog()
	took := regexp.MustCompile(`upgrade: the new process serves.* took=(\S+)`).FindAllStringSubmatch(log, -1)
	drains := regexp.MustCompile(`msg=stopped drain=(\S+)`).FindAllStringSubmatch(log, -1)
	var tooks, drainTimes []string
	for _, m := range took {
		tooks = append(tooks, m[1])
	}
	for _, m := range drains {
		drainTimes = append(drainTimes, m[1])
	}
	t.Logf("from start to serving, the new processes took %s; the old ones drained in %s",
		strings.Join(tooks, " "), strings.Join(drainTimes, " "))
	if len(took) != 5 {
		t.Fatalf("%d hand-overs logged, want 5", len(took))
	}
	if n := strings.Count(log, `msg=stopped`); n != 5 {
		t.Fatalf("%d processes logged that they stopped, want the 5 old ones", n)
	}
	if err := syscall.Kill(current, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the last process to exit", func() bool { return processGone(current) })
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("pid file left behind by the last process (%v)", err)
	}
}
