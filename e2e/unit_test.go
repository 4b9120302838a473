package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The systemd unit shipped in dist/, checked with systemd's own tools:
// systemd-analyze verify finds nothing to say about it, its exposure stays
// where the README says, and its system call filter and address families
// allow every call l4lb makes while serving TCP, UDP and the admin API.

const unitPath = "../dist/l4lb.service"

// unitExecStart is the binary the unit runs; the tests point a copy of the
// unit at a binary they build, since this path does not exist on a build
// machine.
const unitExecStart = "ExecStart=/usr/local/bin/l4lb "

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have, in tenths (the tool's --threshold unit): the README reports
// the current figure.
const maxExposure = 20

// needTool returns the path of a tool the test needs (testnet.NeedTool).
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	return testnet.NeedTool(t, name, pkg)
}

// buildL4LB is cmd/l4lb as it ships (no race detector, no test code):
// the binary TestMain built, or without it when that one has the race
// detector.
func buildL4LB(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return l4lbBin
	}
	bin := filepath.Join(t.TempDir(), "l4lb")
	if out, err := goBuild(bin); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// unitFor writes the shipped unit, with ExecStart pointed at bin, as
// l4lb.service in a directory of its own and returns its path.
func unitFor(t *testing.T, bin string) string {
	t.Helper()
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(text, []byte(unitExecStart)) != 1 {
		t.Fatalf("%s: want exactly one line starting %q", unitPath, unitExecStart)
	}
	text = bytes.Replace(text, []byte(unitExecStart), []byte("ExecStart="+bin+" "), 1)
	path := filepath.Join(t.TempDir(), "l4lb.service")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUnitVerifies(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	unit := unitFor(t, buildL4LB(t))
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	var about []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "l4lb") {
			about = append(about, line)
		} else if line != "" {
			t.Logf("systemd-analyze verify, not about the unit: %s", line)
		}
	}
	if err != nil || len(about) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitPath, err, strings.Join(about, "\n"))
	}
}

func TestUnitExposure(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	unit := unitFor(t, buildL4LB(t))
	cmd := exec.Command(analyze, "security", "--offline=true", "--threshold="+strconv.Itoa(maxExposure), unit)
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("unrecognized option")) {
		t.Skipf("this systemd-analyze cannot analyze a unit file offline:\n%s", out)
	}
	m := regexp.MustCompile(`Overall exposure level for l4lb.service: (\d+\.\d)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	t.Logf("systemd-analyze security: exposure %s", m[1])
	if err != nil {
		t.Fatalf("exposure %s is above %.1f (%v):\n%s", m[1], float64(maxExposure)/10, err, out)
	}
}

// unitDirective returns the values of every line setting key.
func unitDirective(t *testing.T, key string) []string {
	t.Helper()
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// syscallSet expands names and @groups into system calls, as the
// installed systemd defines the groups.
func syscallSet(t *testing.T, analyze string, names []string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	seen := map[string]bool{}
	var add func(string)
	add = func(name string) {
		if !strings.HasPrefix(name, "@") {
			set[name] = true
			return
		}
		if seen[name] {
			return
		}
		seen[name] = true
		out, err := exec.Command(analyze, "syscall-filter", name).Output()
		if err != nil {
			t.Fatalf("systemd-analyze syscall-filter %s: %v", name, err)
		}
		for _, line := range strings.Split(string(out), "\n")[1:] {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			add(line)
		}
	}
	for _, n := range names {
		add(n)
	}
	return set
}

// allowedSyscalls is what the unit's SystemCallFilter= lines allow: the
// allow lists' union less the deny lists' (lines starting with ~).
func allowedSyscalls(t *testing.T, analyze string) map[string]bool {
	t.Helper()
	var allow, deny []string
	for _, v := range unitDirective(t, "SystemCallFilter") {
		if rest, ok := strings.CutPrefix(v, "~"); ok {
			deny = append(deny, strings.Fields(rest)...)
		} else {
			allow = append(allow, strings.Fields(v)...)
		}
	}
	if len(allow) == 0 {
		t.Fatal("the unit has no SystemCallFilter allow list")
	}
	set := syscallSet(t, analyze, allow)
	for name := range syscallSet(t, analyze, deny) {
		delete(set, name)
	}
	return set
}

func TestUnitAllowsWhatL4lbCalls(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	strace := needTool(t, "strace", "strace")
	if testing.Short() {
		t.Skip("runs l4lb under strace")
	}
	bin := buildL4LB(t)
	allowed := allowedSyscalls(t, analyze)
	for _, must := range []string{"execve", "splice", "epoll_pwait", "recvmmsg", "sendmmsg", "pipe2", "eventfd2"} {
		if !allowed[must] {
			t.Errorf("the unit's SystemCallFilter denies %s", must)
		}
	}
	families := map[string]bool{}
	for _, v := range unitDirective(t, "RestrictAddressFamilies") {
		for _, f := range strings.Fields(v) {
			families[f] = true
		}
	}

	calls, socketFamilies := traceServing(t, strace, bin)
	var denied []string
	for name, n := range calls {
		if !allowed[name] {
			denied = append(denied, fmt.Sprintf("%s (%d calls)", name, n))
		}
	}
	sort.Strings(denied)
	if len(denied) > 0 {
		t.Errorf("l4lb made system calls the unit's SystemCallFilter does not allow: %s", strings.Join(denied, ", "))
	}
	for f := range socketFamilies {
		if !families[f] {
			t.Errorf("l4lb opened an %s socket; the unit's RestrictAddressFamilies does not allow it", f)
		}
	}
	// The trace covered the data path: streams spliced, datagrams batched,
	// connections handed over in the upgrade.
	for _, must := range []string{"splice", "accept4", "recvmmsg", "epoll_ctl", "eventfd2", "socketpair", "sendmsg", "recvmsg"} {
		if calls[must] == 0 {
			t.Errorf("the traced run made no %s call: it did not exercise what it should", must)
		}
	}
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	sort.Strings(names)
	t.Logf("socket families %v; %d distinct system calls: %s", socketFamilies, len(names), strings.Join(names, " "))
}

// traceServing runs bin under strace while it serves a TCP stream (long
// enough to be spliced), UDP datagrams and admin requests, its access log
// sent to a syslog socket (as /dev/log would be), then a SIGHUP,
// a binary upgrade (SIGUSR2) when bin has one, and a SIGTERM, and returns the calls made (by name, with counts) and
// the socket families opened.
func traceServing(t *testing.T, strace, bin string) (map[string]int, map[string]bool) {
	t.Helper()
	tcpB := testnet.StartBackend(t, "b", "")
	udpB := testnet.StartUDPBackend(t, "u", "")
	dir := t.TempDir()
	listen, udpListen, adminAddr := testnet.FreeAddr(t), testnet.FreeAddr(t), testnet.FreeAddr(t)
	sock := testnet.UnixgramPath(t)
	daemon := testnet.ListenUnixgram(t, sock)
	cfg := fmt.Sprintf(`[admin]
listen = %q
[log]
access = "syslog"
syslog = "unixgram:%s"
[[listener]]
name = "front"
bind = %q
pool = "p"
[[listener]]
name = "dgram"
bind = %q
protocol = "udp"
pool = "u"
[pool.p]
[[pool.p.backend]]
addr = %q
[pool.u]
[pool.u.health]
enabled = false
[[pool.u.backend]]
addr = %q
`, adminAddr, sock, listen, udpListen, tcpB.Addr, udpB.Addr)
	path := filepath.Join(dir, "l4lb.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-qq", "-o", trace, "--", bin, "run", "-config", path)
	// sd_notify and the watchdog's heartbeats are part of the run.
	systemd := testnet.StartFakeSystemd(t)
	cmd.Env = append(os.Environ(), systemd.Env(), "WATCHDOG_USEC=100000", "WATCHDOG_PID=")
	var stderr testnet.LogBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// Killing strace leaves l4lb running, detached, with the output pipe
	// open: Wait must not wait for it.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var pid int // l4lb, strace's child
	t.Cleanup(func() {
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("l4lb under strace:\n%s", stderr.String())
		}
	})
	// strace forks short-lived children of its own to probe the kernel:
	// l4lb is the child running bin.
	testnet.Eventually(t, "l4lb to start under strace", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil && exe == bin {
				pid = p
				return true
			}
		}
		return false
	})
	testnet.Eventually(t, "l4lb to accept on "+listen, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("l4lb exited early: %v\n%s", err, stderr.String())
		default:
		}
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	systemd.WaitFor(t, "READY=1", func(n testnet.Notification) bool { return n.Has("READY", "1") })
	systemd.WaitFor(t, "a watchdog ping", func(n testnet.Notification) bool { return n.Has("WATCHDOG", "1") })

	// A stream: read in 64 KiB pieces, it is spliced.
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), (4<<20)/16)
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || len(got) != len(payload)+2 {
		t.Fatalf("stream through l4lb: %d bytes (%v), want %d", len(got), err, len(payload)+2)
	}
	// Datagrams, each answered.
	u, err := net.Dial("udp", udpListen)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 64)
	for i := range 4 {
		var n int
		testnet.Eventually(t, "a UDP answer through l4lb", func() bool {
			u.Write([]byte("who"))
			u.SetReadDeadline(time.Now().Add(time.Second))
			n, err = u.Read(buf)
			return err == nil
		})
		if string(buf[:n]) != "u" {
			t.Fatalf("datagram %d answered %q", i, buf[:n])
		}
	}
	for _, route := range []string{"/metrics", "/api/v1/pools"} {
		resp, err := http.Get("http://" + adminAddr + route)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A reload: RELOADING=1, then READY=1 once it is over (or, from an
	// l4lb without reload, its log line).
	syscall.Kill(pid, syscall.SIGHUP)
	reloading := false
	testnet.Eventually(t, "the SIGHUP to be handled", func() bool {
		for _, n := range systemd.Pending(t) {
			if n.Has("RELOADING", "1") {
				reloading = true
			} else if reloading && n.Has("READY", "1") {
				return true
			}
		}
		return strings.Contains(stderr.String(), "SIGHUP")
	})
	// A binary upgrade, when this build has one: the running l4lb executes
	// bin again (execve under the unit's filter), hands the new process its
	// sockets, tells systemd its pid, passes it the open connection and
	// UDP session (a unix socket pair, SCM_RIGHTS) and exits.
	if exec.Command(bin, "upgrade", "-h").Run() == nil {
		held, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		held.SetDeadline(time.Now().Add(60 * time.Second))
		heldR := bufio.NewReader(held)
		if tag, err := heldR.ReadString('\n'); err != nil || tag != "b\n" {
			t.Fatalf("a connection held across the upgrade: %q %v", tag, err)
		}
		old := pid
		syscall.Kill(old, syscall.SIGUSR2)
		n, _ := systemd.WaitFor(t, "MAINPID= after the upgrade", func(n testnet.Notification) bool {
			_, ok := n.Fields["MAINPID"]
			return ok
		})
		if pid, _ = strconv.Atoi(n.Fields["MAINPID"]); pid <= 0 || pid == old {
			t.Fatalf("upgrade: %q, want the new process's pid", n.Raw)
		}
		testnet.Eventually(t, "the old process to exit after its drain", func() bool {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", old))
			return err != nil || strings.Contains(string(st), ") Z ")
		})
		if tag, err := testnet.Hello(listen, ""); err != nil || tag != "b" {
			t.Fatalf("through the upgraded l4lb: %q %v", tag, err)
		}
		held.Write([]byte("ping"))
		if got := make([]byte, 4); func() error { _, err := io.ReadFull(heldR, got); return err }() != nil || string(got) != "ping" {
			t.Fatalf("the connection held across the upgrade: echo %q", got)
		}
		u.Write([]byte("who"))
		u.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := u.Read(buf); err != nil || string(buf[:n]) != "u" {
			t.Fatalf("the UDP session held across the upgrade: %q %v", buf[:n], err)
		}
		held.Close()
	}
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("l4lb under strace: %v", err)
		}
	case <-time.After(60 * time.Second):
		// Its goroutines' stacks, for the log the cleanup writes.
		syscall.Kill(pid, syscall.SIGQUIT)
		select {
		case err := <-done:
			done <- err
		case <-time.After(10 * time.Second):
		}
		t.Fatal("l4lb did not exit after SIGTERM")
	}
	readSyslog(t, daemon, "of the traced run's access log", func(m testnet.SyslogMessage) bool { return m.MsgID == "access" })
	return parseTrace(t, trace)
}

var (
	traceCall   = regexp.MustCompile(`^\d+\s+([a-z_][a-z0-9_]*)\(`)
	traceSocket = regexp.MustCompile(`^\d+\s+socket\((AF_[A-Z0-9]+)`)
)

func parseTrace(t *testing.T, path string) (map[string]int, map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls, families := map[string]int{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, " resumed>") {
			continue // counted where it began
		}
		if m := traceCall.FindStringSubmatch(line); m != nil {
			calls[m[1]]++
		}
		if m := traceSocket.FindStringSubmatch(line); m != nil {
			families[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls, families
}
