package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Helpers of the fleet tests ([cluster] store = "redis" with real l4lb
// processes and a real redis-server): instances, their metrics, an echo
// backend that can stop listening without cutting its connections, and a
// bounded client load.

// fleetInstance is one l4lb process of a fleet test.
type fleetInstance struct {
	name   string
	listen string
	admin  string
	path   string // its configuration file
	p      *proc
}

// fleetRetryKeys retry a refused dial on another backend, so that a
// client never sees one backend stop; fleetMinuteOpenKeys trip a backend
// on 3 failures and keep it open for a minute, through the rest of a test.
const (
	fleetRetryKeys      = "retries = 2\nconnect_timeout = \"2s\""
	fleetMinuteOpenKeys = "failures = 3\nwindow = \"120s\"\ncooldown = \"60s\"\nmax_cooldown = \"60s\""
)

// fleetConfigText is an instance's configuration: the Redis store with the
// fleet tests' timings, one TCP listener "front" in front of pool p.
// poolKeys are added to [pool.p] (algorithm round-robin unless they name
// one); breakerKeys make [pool.p.breaker].
func fleetConfigText(redisURL, instance, listen, admin string, backends []string, poolKeys, breakerKeys string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[cluster]\nstore = \"redis\"\nredis_url = %q\ninstance = %q\ntimeout = \"200ms\"\nsync_interval = \"500ms\"\n", redisURL, instance)
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n[log]\nlevel = \"debug\"\n", admin)
	fmt.Fprintf(&b, "[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", listen)
	algorithm := "algorithm = \"round-robin\"\n"
	if strings.Contains(poolKeys, "algorithm") { // poolKeys chooses its own
		algorithm = ""
	}
	fmt.Fprintf(&b, "[pool.p]\n%s%s\n[pool.p.health]\nenabled = false\n[pool.p.breaker]\n%s\n", algorithm, poolKeys, breakerKeys)
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	return b.String()
}

// startFleetInstance writes name's configuration into dir and starts it
// (bin "": the l4lb TestMain built; attr may run it as another user), waiting
// until it serves and has joined Redis.
func startFleetInstance(t *testing.T, bin string, attr *syscall.SysProcAttr, dir, redisURL, name string, backends []string, poolKeys, breakerKeys string) *fleetInstance {
	t.Helper()
	return startFleetInstanceEdited(t, bin, attr, dir, redisURL, name, backends, poolKeys, breakerKeys, nil)
}

// startFleetInstanceEdited is startFleetInstance with edit, when not nil,
// applied to the configuration's text before it is written.
func startFleetInstanceEdited(t *testing.T, bin string, attr *syscall.SysProcAttr, dir, redisURL, name string, backends []string, poolKeys, breakerKeys string, edit func(string) string) *fleetInstance {
	t.Helper()
	run := func(path string) *proc { return startL4LB(t, bin, attr, "-config", path) }
	return startFleetInstanceWith(t, dir, name, "127.0.0.1", run, func(listen, admin string) string {
		text := fleetConfigText(redisURL, name, listen, admin, backends, poolKeys, breakerKeys)
		if edit != nil {
			text = edit(text)
		}
		return text
	})
}

// startFleetInstanceWith is startFleetInstance with the configuration
// text makes of the instance's listen and admin addresses (free ports on
// host), started by run with the configuration file's path.
func startFleetInstanceWith(t *testing.T, dir, name, host string, run func(path string) *proc, text func(listen, admin string) string) *fleetInstance {
	t.Helper()
	addr := func() string { return net.JoinHostPort(host, strconv.Itoa(testnet.FreePort(t))) }
	in := &fleetInstance{name: name, listen: addr(), admin: addr()}
	in.path = filepath.Join(dir, name+".toml")
	if err := os.WriteFile(in.path, []byte(text(in.listen, in.admin)), 0o644); err != nil {
		t.Fatal(err)
	}
	in.p = run(in.path) // logs its stderr if the test fails
	waitServing(t, in.p, in.listen)
	in.waitMetric(t, "l4lb_cluster_store_up", "to join Redis", func(v float64) bool { return v == 1 })
	return in
}

// waitOpenAtRedis waits until the instance has addr's breaker open at the
// generation srv holds, with srv's open entry at that generation, and
// returns srv's generation and open entry.
func (in *fleetInstance) waitOpenAtRedis(t *testing.T, srv *testnet.Redis, addr string) (gen, open string) {
	t.Helper()
	openS, genS := fleetSeries("l4lb_breaker_open", addr), fleetSeries("l4lb_breaker_generation", addr)
	testnet.Eventually(t, "instance "+in.name+" at Redis's generation of "+addr+", open", func() bool {
		var err1, err2 error
		gen, err1 = srv.Do("GET", fleetKey(addr, "gen"))
		open, err2 = srv.Do("GET", fleetKey(addr, "open"))
		v, ok := in.metric(genS)
		o, ok2 := in.metric(openS)
		return err1 == nil && err2 == nil && ok && ok2 && o == 1 &&
			strconv.FormatFloat(v, 'f', -1, 64) == gen && strings.HasPrefix(open, gen+" ")
	})
	return gen, open
}

// logNotable logs each instance's WARN and ERROR lines.
func logNotable(t *testing.T, ins ...*fleetInstance) {
	t.Helper()
	for _, in := range ins {
		t.Logf("instance %s warned:\n%s", in.name, strings.Join(in.notable(), "\n"))
	}
}

// notable are the instance's log lines at WARN and ERROR, for the test's
// log: what an operator would have been told.
func (in *fleetInstance) notable() []string {
	var out []string
	for line := range strings.SplitSeq(in.p.stderr.String(), "\n") {
		if strings.Contains(line, " level=WARN ") || strings.Contains(line, " level=ERROR ") {
			out = append(out, line)
		}
	}
	return out
}

// fleetTail is the last n lines of s.
func fleetTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fleetHTTP keeps no connection open: the leak checks count them.
var fleetHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// metrics reads every series of the instance's /metrics.
func (in *fleetInstance) metrics() (map[string]float64, error) {
	resp, err := fleetHTTP.Get("http://" + in.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// metric is one series' value; false when it cannot be read.
func (in *fleetInstance) metric(series string) (float64, bool) {
	m, err := in.metrics()
	if err != nil {
		return 0, false
	}
	v, ok := m[series]
	return v, ok
}

// mustMetric is one series' value, failing the test when it is absent.
func (in *fleetInstance) mustMetric(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := in.metric(series)
	if !ok {
		t.Fatalf("instance %s: no series %s in /metrics", in.name, series)
	}
	return v
}

// waitMetric polls series until cond holds of it.
func (in *fleetInstance) waitMetric(t *testing.T, series, what string, cond func(float64) bool) float64 {
	t.Helper()
	var v float64
	testnet.Eventually(t, fmt.Sprintf("instance %s %s (%s)", in.name, what, series), func() bool {
		var ok bool
		v, ok = in.metric(series)
		return ok && cond(v)
	})
	return v
}

// fleetSeries names a backend's series of metric name in pool p.
func fleetSeries(name, addr string) string {
	return fmt.Sprintf("%s{backend=%q,pool=\"p\"}", name, addr)
}

// fleetKey is a backend's Redis key (pkg/fleet/keys.go): the default
// prefix, the breaker key "p/ADDR" in a hash tag, the field.
func fleetKey(addr, field string) string { return "l4lb:{p/" + addr + "}:" + field }

// fleetRedisGen reads the backend's generation and open entry from Redis
// ("(nil)" when absent).
func fleetRedisGen(t *testing.T, srv *testnet.Redis, addr string) (gen, open string) {
	t.Helper()
	gen, err := srv.Do("GET", fleetKey(addr, "gen"))
	if err != nil {
		t.Fatalf("GET %s: %v", fleetKey(addr, "gen"), err)
	}
	open, err = srv.Do("GET", fleetKey(addr, "open"))
	if err != nil {
		t.Fatalf("GET %s: %v", fleetKey(addr, "open"), err)
	}
	return gen, open
}

// fleetEcho is an echo backend that first sends its tag line. Unlike
// testnet.Backend it can stop listening (new dials are refused) while the
// connections it accepted go on, and listen again on the same address: a
// backend process that stops accepting, seen from the balancer.
type fleetEcho struct {
	tag, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // accept loops and connections
}

// startFleetEcho listens on a free port of 127.0.0.1 until the test ends.
func startFleetEcho(t *testing.T, tag string) *fleetEcho {
	t.Helper()
	testnet.CheckLeaks(t)
	e := &fleetEcho{tag: tag, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	if err := e.listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

// listen (again) on the backend's address.
func (e *fleetEcho) listen() error {
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.ln, e.addr = ln, ln.Addr().String()
	e.mu.Unlock()
	e.wg.Add(1)
	go e.accept(ln)
	return nil
}

// unlisten closes the listener: new dials are refused, open connections
// carry on. (A dial the kernel completed but nobody accepted yet is reset
// by the close, as with any backend that stops.)
func (e *fleetEcho) unlisten() {
	e.mu.Lock()
	ln := e.ln
	e.ln = nil
	e.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

func (e *fleetEcho) close() {
	e.unlisten()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func (e *fleetEcho) accept(ln net.Listener) {
	defer e.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() {
				e.mu.Lock()
				delete(e.conns, c)
				e.mu.Unlock()
				c.Close()
			}()
			if _, err := fmt.Fprintf(c, "%s\n", e.tag); err != nil {
				return
			}
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// fleetLoad is a bounded client load: goroutines that each open
// connections one after another (tag line, one line echoed, close) until
// stopped, or until their own cap of connections or time runs out.
type fleetLoad struct {
	ok       atomic.Int64
	byTarget sync.Map // listen address -> *atomic.Int64 of successes
	mu       sync.Mutex
	failures []fleetFailure
	wg       sync.WaitGroup
	stop     chan struct{}
	capped   atomic.Int64 // goroutines that ended on their cap, not on stop
}

// fleetFailure is one connection that failed, with when it began and
// ended.
type fleetFailure struct {
	began, ended time.Time
	msg          string
}

// startFleetLoad starts perTarget client goroutines on every address, each
// making at most maxConns connections within maxTime, pausing pause
// between two.
func startFleetLoad(targets []string, perTarget, maxConns int, maxTime, pause time.Duration) *fleetLoad {
	l := &fleetLoad{stop: make(chan struct{})}
	end := time.Now().Add(maxTime)
	for _, addr := range targets {
		n := &atomic.Int64{}
		l.byTarget.Store(addr, n)
		for g := range perTarget {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for i := range maxConns {
					select {
					case <-l.stop:
						return
					default:
					}
					if time.Now().After(end) {
						l.capped.Add(1)
						return
					}
					began := time.Now()
					if err := fleetEchoOnce(addr, fmt.Sprintf("%s g%d c%d", addr, g, i)); err != nil {
						l.mu.Lock()
						if len(l.failures) < 50 {
							l.failures = append(l.failures, fleetFailure{began, time.Now(), err.Error()})
						}
						l.mu.Unlock()
					} else {
						l.ok.Add(1)
						n.Add(1)
					}
					time.Sleep(pause)
				}
				l.capped.Add(1)
			}()
		}
	}
	return l
}

// succeeded is the successes through addr.
func (l *fleetLoad) succeeded(addr string) int64 {
	v, _ := l.byTarget.Load(addr)
	return v.(*atomic.Int64).Load()
}

// end stops the load and waits for its goroutines.
func (l *fleetLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// noneFailed fails the test if a connection of the load failed, but for
// those a backend's stop itself may cause, which it logs and counts: a
// connection the backend had completed but not accepted yet when its
// listener closed (between stopped and stoppedEnd) is reset. The client
// sees that reset before the tag line or, when l4lb passes it on before
// the client's dial has looked at its socket (a loaded machine), as the
// dial's own error. It fails the test too if a load goroutine ran out of
// its cap before the test ended it (the run took too long: total).
func (l *fleetLoad) noneFailed(t *testing.T, stopped, stoppedEnd time.Time, total time.Duration) (excused int) {
	t.Helper()
	var fails []string
	for _, f := range l.failed() {
		resetEarly := strings.Contains(f.msg, "no tag line") ||
			strings.HasPrefix(f.msg, "dial: ") && strings.Contains(f.msg, "connection reset by peer")
		if !f.began.After(stoppedEnd) && !f.ended.Before(stopped) && resetEarly {
			excused++
			t.Logf("excused: a connection in the backend's accept queue when it stopped: %s", f.msg)
			continue
		}
		fails = append(fails, f.msg)
	}
	if len(fails) > 0 {
		t.Fatalf("%d client connections failed (of %d that succeeded):\n%s", len(fails), l.ok.Load(), strings.Join(fails, "\n"))
	}
	if n := l.capped.Load(); n > 0 {
		t.Fatalf("%d load goroutines ran out of their cap before the test ended: the run took too long (%v)", n, total)
	}
	return excused
}

// progress waits until n more connections succeeded through every one of
// targets.
func (l *fleetLoad) progress(t *testing.T, what string, n int64, targets ...string) {
	t.Helper()
	want := make([]int64, len(targets))
	for i, addr := range targets {
		want[i] = l.succeeded(addr) + n
	}
	testnet.Eventually(t, what, func() bool {
		for i, addr := range targets {
			if l.succeeded(addr) < want[i] {
				return false
			}
		}
		return true
	})
}

func (l *fleetLoad) failed() []fleetFailure {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fleetFailure(nil), l.failures...)
}

// fleetEchoOnce is one client connection: the backend's tag, then one
// line sent and echoed.
func fleetEchoOnce(addr, msg string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	tag, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("%s: no tag line: %w", msg, err)
	}
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return fmt.Errorf("%s: send (tag %q): %w", msg, tag, err)
	}
	echo, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("%s: echo (tag %q): %w", msg, tag, err)
	}
	if !bytes.Equal([]byte(echo), []byte(msg+"\n")) {
		return fmt.Errorf("%s: echo %q (tag %q)", msg, echo, tag)
	}
	return nil
}
