package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// syslogConfig writes a one-listener config whose access log and process
// log go to the unixgram socket at sock, facility local4.
func syslogConfig(t *testing.T, backend, sock string) (path, listen, adminAddr string) {
	t.Helper()
	listen, adminAddr = testnet.FreeAddr(t), testnet.FreeAddr(t)
	path = filepath.Join(t.TempDir(), "l4lb.toml")
	text := fmt.Sprintf(`[admin]
listen = %q
[log]
access = "syslog"
process = "syslog"
syslog = "unixgram:%s"
syslog_facility = "local4"
[[listener]]
name = "front"
bind = %q
pool = "p"
[pool.p]
[[pool.p.backend]]
addr = %q
[pool.p.health]
enabled = false
`, adminAddr, sock, listen, backend)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listen, adminAddr
}

// syslogSocket is a path for the daemon's socket, short enough for
// sun_path.
func syslogSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2esl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "log")
}

// syslogDaemon listens on the unixgram socket at path, as a daemon's
// /dev/log does.
func syslogDaemon(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var rfc5424Message = regexp.MustCompile(`(?s)^<(\d{1,3})>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (\S+) (\S+) (\d+) (\S+) - (.*)$`)

// syslogMessage is an RFC 5424 message as l4lb sends it.
type syslogMessage struct {
	pri                    int
	time                   time.Time
	host, app, msgid, body string
	pid                    int
}

func parseSyslog(t *testing.T, b []byte) syslogMessage {
	t.Helper()
	m := rfc5424Message.FindSubmatch(b)
	if m == nil {
		t.Fatalf("not an RFC 5424 message as l4lb writes them: %q", b)
	}
	pri, _ := strconv.Atoi(string(m[1]))
	pid, _ := strconv.Atoi(string(m[5]))
	ts, err := time.Parse(time.RFC3339Nano, string(m[2]))
	if err != nil {
		t.Fatal(err)
	}
	return syslogMessage{pri: pri, time: ts, host: string(m[3]), app: string(m[4]), pid: pid, msgid: string(m[6]), body: string(m[7])}
}

// readSyslog reads messages from c until want takes one, failing at a
// generous deadline.
func readSyslog(t *testing.T, c *net.UnixConn, what string, want func(syslogMessage) bool) syslogMessage {
	t.Helper()
	buf := make([]byte, 65536)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.SetReadDeadline(deadline)
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no syslog message %s: %v", what, err)
		}
		if m := parseSyslog(t, buf[:n]); want(m) {
			return m
		}
	}
}

// fillSocket fills the receive queue of the unixgram socket at path: it
// sends from fresh sockets (each also bounded by its own send buffer)
// until a fresh one's first send finds the queue full.
func fillSocket(t *testing.T, path string) {
	t.Helper()
	var fds []int
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for range 1000 {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			err := syscall.Sendto(fd, []byte("filler"), 0, nil)
			if errors.Is(err, syscall.EAGAIN) {
				if i == 0 {
					return
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("the socket's queue never filled")
}

// l4lb with access and process = "syslog" sends each ended client as one
// RFC 5424 message (MSGID access, info, its body the JSON record) and its
// own log as others (MSGID process, severity from the level), nothing of
// either on standard error.
func TestSyslogAccessAndProcessLog(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	sock := syslogSocket(t)
	daemon := syslogDaemon(t, sock)
	path, listen, adminAddr := syslogConfig(t, b.Addr, sock)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)

	const local4 = 20
	on := readSyslog(t, daemon, `"access log on"`, func(m syslogMessage) bool {
		return m.msgid == "process" && strings.Contains(m.body, `msg="access log on"`)
	})
	host, _ := os.Hostname()
	if on.pri != local4*8+6 || on.app != "l4lb" || on.pid != p.cmd.Process.Pid || on.host != host ||
		!strings.Contains(on.body, "format=syslog") || strings.Contains(on.body, "time=") {
		t.Errorf("process message %+v: want PRI %d, l4lb, pid %d, host %s, format=syslog, no time= in the body", on, local4*8+6, p.cmd.Process.Pid, host)
	}

	tag, err := testnet.Hello(listen, "")
	if err != nil || tag != "b" {
		t.Fatalf("hello: %q, %v", tag, err)
	}
	var record map[string]any
	access := readSyslog(t, daemon, "for the client", func(m syslogMessage) bool {
		return m.msgid == "access" && json.Unmarshal([]byte(m.body), &record) == nil && record["backend"] == b.Addr
	})
	if access.pri != local4*8+6 || access.pid != p.cmd.Process.Pid || record["listener"] != "front" || record["result"] != "ok" {
		t.Errorf("access message %+v, record %v", access, record)
	}
	if end, err := time.Parse(time.RFC3339Nano, record["time"].(string)); err != nil || !end.Equal(access.time) {
		t.Errorf("the header's time %v is not the record's %v", access.time, record["time"])
	}
	if v := e2eutil.Metric(t, adminAddr, `l4lb_syslog_dropped_total{log="access",reason="full"}`); v != 0 {
		t.Errorf("access drops %v with a daemon reading", v)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if s := p.stderr.String(); strings.Contains(s, "access log on") {
		t.Errorf("the process log went to standard error too:\n%s", s)
	}
}

// A daemon whose socket is full never stalls a relay: clients are served
// as ever while every record and process line is dropped and counted;
// once the daemon reads again, records arrive again.
func TestSyslogFullSocketNeverStallsARelay(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	sock := syslogSocket(t)
	daemon := syslogDaemon(t, sock)
	fillSocket(t, sock)
	path, listen, adminAddr := syslogConfig(t, b.Addr, sock)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)

	const clients = 200
	deadline := time.Now().Add(60 * time.Second)
	for i := range clients {
		if tag, err := testnet.Hello(listen, ""); err != nil || tag != "b" {
			t.Fatalf("client %d: %q, %v", i, tag, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d clients in 60s", i)
		}
	}
	series := `l4lb_syslog_dropped_total{log="access",reason="full"}`
	testnet.Eventually(t, "every client's record dropped as full", func() bool {
		return e2eutil.Metric(t, adminAddr, series) >= clients
	})
	if v := e2eutil.Metric(t, adminAddr, "l4lb_access_log_dropped_total"); v < clients {
		t.Errorf("l4lb_access_log_dropped_total %v, want at least %d", v, clients)
	}
	if v := e2eutil.Metric(t, adminAddr, `l4lb_syslog_dropped_total{log="process",reason="full"}`); v < 1 {
		t.Errorf("process log drops %v: its start lines found the socket full", v)
	}

	// The daemon catches up: the next client's record is there.
	buf := make([]byte, 65536)
	for {
		daemon.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := daemon.ReadFrom(buf); err != nil {
			break
		}
	}
	if _, err := testnet.Hello(listen, ""); err != nil {
		t.Fatal(err)
	}
	readSyslog(t, daemon, "once the daemon reads", func(m syslogMessage) bool { return m.msgid == "access" })
}

// No daemon at the socket's path when l4lb starts: records are dropped as
// unreachable; once a daemon listens there, the next reconnect (within a
// second) reaches it, with no restart of l4lb.
func TestSyslogAbsentDaemonHeals(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	sock := syslogSocket(t)
	path, listen, adminAddr := syslogConfig(t, b.Addr, sock)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)
	if _, err := testnet.Hello(listen, ""); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the record dropped as unreachable", func() bool {
		return e2eutil.Metric(t, adminAddr, `l4lb_syslog_dropped_total{log="access",reason="unreachable"}`) >= 1
	})

	daemon := syslogDaemon(t, sock)
	got := make(chan struct{})
	go func() {
		defer close(got)
		buf := make([]byte, 65536)
		daemon.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			n, _, err := daemon.ReadFrom(buf)
			if err != nil || rfc5424Message.Match(buf[:n]) && strings.Contains(string(buf[:n]), " access - ") {
				return
			}
		}
	}()
	// Clients until one's record arrives: the first within a second of
	// the daemon's start is due to reconnect.
	for i := 0; ; i++ {
		if _, err := testnet.Hello(listen, ""); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if i == 300 {
			t.Fatal("no record reached the daemon in 30s of clients")
		}
	}
}
