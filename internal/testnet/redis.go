package testnet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A real redis-server for tests of the Redis Store: Debian package
// redis-server, which .ci/run installs. Tests talk to it through the code
// under test; Do, which speaks RESP2 by hand, is for inspecting keys.

// Redis is a redis-server process of a test's own, on 127.0.0.1.
type Redis struct {
	Addr string // 127.0.0.1:port

	t        testing.TB
	port     int
	dir      string // --dir; emptied before every start
	logPath  string // redis-server's stdout and stderr
	args     []string
	conf     string // a configuration file, given first (redis-sentinel needs one it can rewrite)
	password string // --requirepass from the extra arguments, for Do

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once the running process was waited for
}

// redisServerPath finds redis-server on PATH or where Debian puts it; ""
// when it is not installed.
func redisServerPath() string { return ToolPath("redis-server") }

// StartRedis starts redis-server on a free port of 127.0.0.1, with no
// persistence (--save "" --appendonly no), --dir in the test's temporary
// directory and --protected-mode no, followed by extraArgs (which must not
// change --port or --bind), and waits until it answers. When the test ends
// it is killed and waited for; the test is leak-checked (CheckLeaks).
//
// Without redis-server the test fails as root and skips otherwise
// (tools.go).
func StartRedis(t testing.TB, extraArgs ...string) *Redis {
	t.Helper()
	bin := redisServerPath()
	if bin == "" {
		Missing(t, "redis-server not installed", "redis-server")
	}
	return startRedisProcess(t, bin, nil, extraArgs)
}

// startRedisProcess is StartRedis for the program bin (redis-server or
// redis-sentinel); conf, when not nil, is written to a configuration file
// of the test's own that is given first.
func startRedisProcess(t testing.TB, bin string, conf []byte, extraArgs []string) *Redis {
	t.Helper()
	CheckLeaks(t)
	base := t.TempDir()
	r := &Redis{
		t:       t,
		dir:     filepath.Join(base, "data"),
		logPath: filepath.Join(base, "redis.log"),
		args:    append([]string{bin}, extraArgs...),
	}
	if conf != nil {
		r.conf = filepath.Join(base, "redis.conf")
		if err := os.WriteFile(r.conf, conf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range extraArgs {
		if a == "--requirepass" && i+1 < len(extraArgs) {
			r.password = extraArgs[i+1]
		}
	}
	t.Cleanup(r.Kill)
	// A port free a moment ago can be taken before redis-server binds it:
	// try a few.
	for try := 0; ; try++ {
		r.port = FreePort(t)
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
		busy, err := r.start()
		if err == nil {
			return r
		}
		if !busy || try == 4 {
			t.Fatalf("redis-server on %s: %v", r.Addr, err)
		}
	}
}

// URL is the server's address as a redis:// URL.
func (r *Redis) URL() string { return "redis://" + r.Addr }

// Kill kills redis-server (SIGKILL) and waits until it is gone, as when
// the store vanishes mid-traffic: its port then refuses connections.
// Killing a killed server does nothing.
func (r *Redis) Kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart kills redis-server if it runs and starts it again on the same
// port with no data, as after a crash without persistence, and waits until
// it answers. A port still (or meanwhile) busy is retried for a few
// seconds. It fails the test on error, so call it from the test's
// goroutine.
func (r *Redis) Restart() {
	r.t.Helper()
	r.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		busy, err := r.start()
		if err == nil {
			return
		}
		if !busy || time.Now().After(deadline) {
			r.t.Fatalf("redis-server restart on %s: %v", r.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start runs redis-server at r.port with an empty data directory and waits
// until it answers. busy reports a failure because the port was taken.
func (r *Redis) start() (busy bool, err error) {
	if err := os.RemoveAll(r.dir); err != nil {
		return false, err
	}
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		return false, err
	}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return false, err
	}
	defer logf.Close() // the child has its own copy
	st, err := logf.Stat()
	if err != nil {
		return false, err
	}
	logStart := st.Size()
	fmt.Fprintf(logf, "--- starting redis-server on %s\n", r.Addr)
	args := []string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--daemonize", "no",
		"--logfile", "",
	}
	if r.conf != "" {
		args = append([]string{r.conf}, args...)
	}
	cmd := exec.Command(r.args[0], append(args, r.args[1:]...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			r.mu.Lock()
			if r.cmd == cmd {
				r.cmd = nil
			}
			r.mu.Unlock()
			log := r.logSince(logStart)
			return strings.Contains(log, "in use"), fmt.Errorf("redis-server exited at start (%v); its log ends:\n%s", cmd.ProcessState, tail(log, 20))
		default:
		}
		if r.answers() {
			return false, nil
		}
		if time.Now().After(deadline) {
			r.Kill()
			return false, fmt.Errorf("redis-server did not answer within 20s; its log ends:\n%s", tail(r.logSince(logStart), 20))
		}
		time.Sleep(10 * time.Millisecond) // not listening yet: refused at once
	}
}

// answers reports whether the server answers a PING with any reply (an
// error, such as NOAUTH, means it is up too).
func (r *Redis) answers() bool {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(respCommand([]string{"PING"})); err != nil {
		return false
	}
	_, err = readRESP(bufio.NewReader(c))
	var re RedisError
	return err == nil || errors.As(err, &re)
}

// Log is everything redis-server wrote so far, for failure messages.
func (r *Redis) Log() string { return r.logSince(0) }

func (r *Redis) logSince(off int64) string {
	b, _ := os.ReadFile(r.logPath)
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	return string(b[off:])
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RedisError is an error reply of the server, such as "ERR unknown
// command" or "NOAUTH Authentication required.".
type RedisError string

func (e RedisError) Error() string { return "redis: " + string(e) }

// Do sends one command over a fresh TCP connection (authenticating first
// when the extra arguments set --requirepass) and returns the reply as
// text: a simple string or bulk string as it is, an integer in decimal, a
// nil reply as "(nil)", an array as its elements joined by "\n" (an error
// inside one as "(error) MSG"). An error reply comes back as a RedisError;
// a server that is down as the dial's error.
func (r *Redis) Do(args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("redis: Do needs a command")
	}
	c, err := net.DialTimeout("tcp", r.Addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	if r.password != "" {
		if _, err := c.Write(respCommand([]string{"AUTH", r.password})); err != nil {
			return "", err
		}
		if _, err := readRESP(br); err != nil {
			return "", err
		}
	}
	if _, err := c.Write(respCommand(args)); err != nil {
		return "", err
	}
	return readRESP(br)
}

// respCommand encodes a command as a RESP array of bulk strings.
func respCommand(args []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// readRESP reads one RESP2 reply and renders it as Do describes.
func readRESP(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("redis: malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return "", RedisError(body)
	case ':':
		if _, err := strconv.ParseInt(body, 10, 64); err != nil {
			return "", fmt.Errorf("redis: malformed integer reply %q", body)
		}
		return body, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return "", fmt.Errorf("redis: malformed bulk string length %q", body)
		}
		if n == -1 {
			return "(nil)", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		if !bytes.HasSuffix(buf, []byte("\r\n")) {
			return "", errors.New("redis: bulk string not ended by CRLF")
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return "", fmt.Errorf("redis: malformed array length %q", body)
		}
		if n == -1 {
			return "(nil)", nil
		}
		elems := make([]string, 0, n)
		for range n {
			e, err := readRESP(br)
			var re RedisError
			if errors.As(err, &re) {
				e, err = "(error) "+string(re), nil
			}
			if err != nil {
				return "", err
			}
			elems = append(elems, e)
		}
		return strings.Join(elems, "\n"), nil
	}
	return "", fmt.Errorf("redis: unknown reply type %q", kind)
}

// RedisInfo sends INFO section on c, a connection to a redis-server the
// caller dialed (with its own deadline: the bench dials only through its
// loopback guard), and returns the section's fields, key to value.
func RedisInfo(c net.Conn, section string) (map[string]string, error) {
	if _, err := c.Write(respCommand([]string{"INFO", section})); err != nil {
		return nil, err
	}
	body, err := readRESP(bufio.NewReader(c))
	if err != nil {
		return nil, fmt.Errorf("INFO %s: %w", section, err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(body, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out, nil
}
