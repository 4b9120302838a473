package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// l4lbBin is the l4lb binary these tests run: built once by TestMain from
// ../cmd/l4lb, with the race detector when the tests have it.
var l4lbBin string

const binEnv = "L4LB_E2E_BINARY"

func TestMain(m *testing.M) {
	// A test that runs this binary again (in a network namespace, say)
	// gives it the l4lb it built.
	if l4lbBin = os.Getenv(binEnv); l4lbBin != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "l4lb-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Readable by every user: some tests run l4lb as nobody.
	os.Chmod(dir, 0o755)
	l4lbBin = filepath.Join(dir, "l4lb")
	var flags []string
	if raceEnabled {
		flags = append(flags, "-race")
	}
	if out, err := goBuild(l4lbBin, flags...); err != nil {
		fmt.Fprintf(os.Stderr, "go build ../cmd/l4lb: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv(binEnv, l4lbBin)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goBuild builds ../cmd/l4lb to out, with flags.
func goBuild(out string, flags ...string) ([]byte, error) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			return nil, err
		}
	}
	args := append(append([]string{"build", "-o", out}, flags...), "../cmd/l4lb")
	return exec.Command(gobin, args...).CombinedOutput()
}

// proc is an l4lb process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stdout *testnet.LogBuffer
	stderr *testnet.LogBuffer
	done   chan error
}

// startL4LB starts l4lb (bin; "": the binary TestMain built) with args,
// as startProc does.
func startL4LB(t *testing.T, bin string, attr *syscall.SysProcAttr, args ...string) *proc {
	t.Helper()
	if bin == "" {
		bin = l4lbBin
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = attr
	return startProc(t, "l4lb", cmd, nil)
}

// runL4LB runs l4lb with args to its end (a command, or a start that
// fails) and returns its exit code.
func runL4LB(t *testing.T, args []string, stdout, stderr io.Writer) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, l4lbBin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("l4lb %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode()
}

// startProc starts cmd (l4lb, nginx, haproxy) with its output captured,
// until the test ends: then it is killed and waited for, and on failure
// its output and the files in logs are logged.
func startProc(t *testing.T, name string, cmd *exec.Cmd, logs []string) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stdout: &testnet.LogBuffer{}, stderr: &testnet.LogBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, p.stdout.String(), name, p.stderr.String())
			for _, f := range logs {
				data, _ := os.ReadFile(f)
				t.Logf("%s %s:\n%s", name, filepath.Base(f), data)
			}
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns the exit code, failing after a generous deadline.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		p.done <- nil // for the cleanup
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatal("l4lb did not exit")
		return -1
	}
}

func waitServing(t *testing.T, p *proc, addr string) {
	t.Helper()
	waitAccepting(t, "l4lb", p, addr)
}

// exited reports whether p has ended (and keeps the news for the next
// look and for the cleanup).
func exited(p *proc) (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// waitAccepting waits until addr accepts a TCP connection (closed at
// once), failing the test if p exits first.
func waitAccepting(t *testing.T, name string, p *proc, addr string) {
	t.Helper()
	testnet.Eventually(t, name+" to accept on "+addr, func() bool {
		if done, err := exited(p); done {
			t.Fatalf("%s exited early: %v\n%s%s", name, err, p.stdout.String(), p.stderr.String())
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// servingOneClient starts l4lb (with extra config) in front of a tagged
// echo backend and opens one relayed connection, greeting read.
func servingOneClient(t *testing.T, extra string) (*proc, string, net.Conn, *bufio.Reader) {
	t.Helper()
	b := testnet.StartBackend(t, "b", "")
	path, listen, _ := e2eutil.WriteConfig(t, "", []string{b.Addr}, extra)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if tag, _ := r.ReadString('\n'); tag != "b\n" {
		t.Fatalf("greeting %q", tag)
	}
	return p, listen, c, r
}

func TestSIGTERMDrainsOpenRelays(t *testing.T) {
	p, listen, c, r := servingOneClient(t, "[global]\nshutdown_timeout = \"20s\"")
	p.signal(t, syscall.SIGTERM)
	testnet.Eventually(t, "new connections refused", func() bool {
		nc, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	// The open relay still works while draining.
	fmt.Fprintf(c, "during drain\n")
	if line, err := r.ReadString('\n'); err != nil || line != "during drain\n" {
		t.Fatalf("relay during drain: %q %v", line, err)
	}
	select {
	case <-p.done:
		t.Fatal("l4lb exited with a relay still open")
	case <-time.After(300 * time.Millisecond):
	}
	c.Close()
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after drain, want 0", code)
	}
	if !strings.Contains(p.stderr.String(), "shutting down") {
		t.Fatalf("no shutdown log line:\n%s", p.stderr.String())
	}
}

func TestShutdownTimeoutClosesTheRest(t *testing.T) {
	p, _, c, _ := servingOneClient(t, "[global]\nshutdown_timeout = \"300ms\"")
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d, want 0 after closing what the drain left", code)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("held connection: %v, want it cut with a reset", err)
	}
}

func TestSIGHUPReloadsTheConfiguration(t *testing.T) {
	b := testnet.StartBackend(t, "b", "")
	c := testnet.StartBackend(t, "c", "")
	path, listen, _ := e2eutil.WriteConfig(t, "", []string{b.Addr}, "")
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same listener, the pool now on backend c only.
	next := strings.Replace(string(text), b.Addr, c.Addr, 1)
	if err := os.WriteFile(path, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	p.signal(t, syscall.SIGHUP)
	testnet.Eventually(t, "new clients to reach backend c", func() bool {
		tag, err := testnet.Hello(listen, "")
		return err == nil && tag == "c"
	})
	// The new pool serves from the moment the listener takes it, a moment
	// before the reload logs that it is done: wait for the line.
	testnet.Eventually(t, "the reload log line", func() bool {
		return strings.Contains(p.stderr.String(), "configuration reloaded")
	})
	// The line names what changed.
	for _, want := range []string{"changes.backends_added=[p/" + c.Addr + "]", "changes.backends_removed=[p/" + b.Addr + "]"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("the reload's log line does not say %s:\n%s", want, p.stderr.String())
		}
	}
	// A broken file: every error logged with its line, the running
	// configuration stays.
	if err := os.WriteFile(path, []byte(next+"[pool.p.health]\nrise = -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.signal(t, syscall.SIGHUP)
	testnet.Eventually(t, "the failed reload's log line", func() bool {
		return strings.Contains(p.stderr.String(), "reload failed") && strings.Contains(p.stderr.String(), "rise")
	})
	if tag, err := testnet.Hello(listen, ""); err != nil || tag != "c" {
		t.Fatalf("after a failed reload: %q %v, want still serving from c", tag, err)
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestRunsUnprivilegedAndSplices(t *testing.T) {
	var attr *syscall.SysProcAttr
	bin := ""
	dir := t.TempDir()
	if os.Getuid() == 0 {
		// Production runs l4lb as an unprivileged user: so does this test.
		bin, dir = testnet.CopyExecutable(t, l4lbBin)
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	b := testnet.StartBackend(t, "b", "")
	path, listen, adminAddr := e2eutil.WriteConfig(t, dir, []string{b.Addr}, "")
	p := startL4LB(t, bin, attr, "-config", path)
	waitServing(t, p, listen)

	const size = 8 << 20
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || len(got) != size+2 || !bytes.Equal(got[2:], payload) {
		t.Fatalf("echo through l4lb: %d bytes (%v), want %d", len(got), err, size+2)
	}
	testnet.Eventually(t, "relay accounted", func() bool {
		return e2eutil.Metric(t, adminAddr, `l4lb_relay_bytes_total{path="splice"}`)+
			e2eutil.Metric(t, adminAddr, `l4lb_relay_bytes_total{path="copy"}`) >= 2*size+2
	})
	if sp := e2eutil.Metric(t, adminAddr, `l4lb_relay_bytes_total{path="splice"}`); sp < 2*size*3/4 {
		t.Fatalf("%v of %d bytes spliced, want the stream spliced", sp, 2*size)
	}
	if os.Getuid() == 0 {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if !regexp.MustCompile(`(?m)^Uid:\s+65534\b`).Match(status) {
			t.Fatalf("l4lb is not running as uid 65534:\n%s", status)
		}
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestDemoOnTheShippedConfig(t *testing.T) {
	for _, a := range []string{"127.0.0.1:8080", "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003", "127.0.0.1:9090"} {
		if ln, err := net.Listen("tcp", a); err != nil {
			t.Skipf("the demo's port %s is busy here: %v", a, err)
		} else {
			ln.Close()
		}
	}
	for _, a := range []string{"127.0.0.1:8081", "127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"} {
		if pc, err := net.ListenPacket("udp", a); err != nil {
			t.Skipf("the demo's UDP port %s is busy here: %v", a, err)
		} else {
			pc.Close()
		}
	}
	p := startL4LB(t, "", nil, "demo", "-config", "../config.toml")
	testnet.Eventually(t, "the demo to show its requests", func() bool {
		return strings.Contains(p.stdout.String(), "Ctrl-C stops the demo")
	})
	out := p.stdout.String()
	for i, backend := range []string{"9001", "9002", "9003"} {
		want := fmt.Sprintf("request %d -> [backend 127.0.0.1:%s] hello %d", i+1, backend, i+1)
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	// Each datagram comes from a client port of its own: a session each,
	// round robin over the UDP pool.
	for i, backend := range []string{"9101", "9102", "9103"} {
		want := fmt.Sprintf("datagram %d -> hello %d [backend 127.0.0.1:%s]", i+1, i+1, backend)
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	if want := "echo hi | nc -u -w1 127.0.0.1 8081"; !strings.Contains(out, want) {
		t.Fatalf("demo output lacks %q:\n%s", want, out)
	}
	// A datagram of the test's own goes through 8081 and back, answered by
	// one of the UDP echo backends, and the UDP pool's send-expect checks
	// ("ping" out, "ping..." back) pass on the demo's backends.
	c, err := net.Dial("udp", "127.0.0.1:8081")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if reply := string(buf[:n]); err != nil || !regexp.MustCompile(`^hi \[backend 127\.0\.0\.1:910[123]\]\n$`).MatchString(reply) {
		t.Fatalf("datagram through 127.0.0.1:8081: %q, %v; want it echoed by a UDP backend", reply, err)
	}
	testnet.Eventually(t, "the UDP pool's send-expect checks to pass", func() bool {
		return e2eutil.Metric(t, "127.0.0.1:9090", `l4lb_backend_dials_total{backend="127.0.0.1:9101",kind="health",pool="udp-echo",result="success"}`) >= 1
	})
	if f := e2eutil.Metric(t, "127.0.0.1:9090", `l4lb_backend_dials_total{backend="127.0.0.1:9101",kind="health",pool="udp-echo",result="failure"}`); f != 0 {
		t.Fatalf("%v failed health checks of a demo UDP backend", f)
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t); code != 0 {
		t.Fatalf("demo exit code %d", code)
	}
}
