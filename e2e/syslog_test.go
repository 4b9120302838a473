package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
	return logConfig(t, backend, fmt.Sprintf("access = \"syslog\"\nprocess = \"syslog\"\nsyslog = \"unixgram:%s\"\nsyslog_facility = \"local4\"\n", sock), "")
}

// readSyslog reads messages from c until want takes one, failing at a
// generous deadline.
func readSyslog(t *testing.T, c *net.UnixConn, what string, want func(testnet.SyslogMessage) bool) testnet.SyslogMessage {
	t.Helper()
	buf := make([]byte, 65536)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.SetReadDeadline(deadline)
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no syslog message %s: %v", what, err)
		}
		if m := testnet.MustParseSyslog(t, buf[:n]); want(m) {
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
	sock := testnet.UnixgramPath(t)
	daemon := testnet.ListenUnixgram(t, sock)
	path, listen, adminAddr := syslogConfig(t, b.Addr, sock)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)

	const local4 = 20
	on := readSyslog(t, daemon, `"access log on"`, func(m testnet.SyslogMessage) bool {
		return m.MsgID == "process" && strings.Contains(m.Body, `msg="access log on"`)
	})
	host, _ := os.Hostname()
	pid := strconv.Itoa(p.cmd.Process.Pid)
	if on.PRI != local4*8+6 || on.App != "l4lb" || on.ProcID != pid || on.Host != host ||
		!strings.Contains(on.Body, "format=syslog") || strings.Contains(on.Body, "time=") {
		t.Errorf("process message %+v: want PRI %d, l4lb, pid %d, host %s, format=syslog, no time= in the body", on, local4*8+6, p.cmd.Process.Pid, host)
	}

	tag, err := testnet.Hello(listen, "")
	if err != nil || tag != "b" {
		t.Fatalf("hello: %q, %v", tag, err)
	}
	var record map[string]any
	access := readSyslog(t, daemon, "for the client", func(m testnet.SyslogMessage) bool {
		return m.MsgID == "access" && json.Unmarshal([]byte(m.Body), &record) == nil && record["backend"] == b.Addr
	})
	if access.PRI != local4*8+6 || access.ProcID != pid || record["listener"] != "front" || record["result"] != "ok" {
		t.Errorf("access message %+v, record %v", access, record)
	}
	if end, err := time.Parse(time.RFC3339Nano, record["time"].(string)); err != nil || !end.Equal(access.Time) {
		t.Errorf("the header's time %v is not the record's %v", access.Time, record["time"])
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
	sock := testnet.UnixgramPath(t)
	daemon := testnet.ListenUnixgram(t, sock)
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
	readSyslog(t, daemon, "once the daemon reads", func(m testnet.SyslogMessage) bool { return m.MsgID == "access" })
}

// No daemon at the socket's path when l4lb starts: records are dropped as
// unreachable; once a daemon listens there, the next reconnect (within a
// second) reaches it, with no restart of l4lb.
func TestSyslogAbsentDaemonHeals(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	sock := testnet.UnixgramPath(t)
	path, listen, adminAddr := syslogConfig(t, b.Addr, sock)
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)
	if _, err := testnet.Hello(listen, ""); err != nil {
		// Its process log goes to the absent daemon: what l4lb did with
		// the client is in its counts only.
		t.Fatalf("%v; l4lb's counts:\n%s", err, clientCounts(t, adminAddr))
	}
	testnet.Eventually(t, "the record dropped as unreachable", func() bool {
		return e2eutil.Metric(t, adminAddr, `l4lb_syslog_dropped_total{log="access",reason="unreachable"}`) >= 1
	})
	if s := p.stderr.String(); !strings.Contains(s, "process log: no syslog daemon at unixgram:"+sock+" yet") {
		t.Errorf("standard error does not say the daemon is missing:\n%s", s)
	}

	daemon := testnet.ListenUnixgram(t, sock)
	got := make(chan struct{})
	go func() {
		defer close(got)
		buf := make([]byte, 65536)
		daemon.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			n, _, err := daemon.ReadFrom(buf)
			if m, perr := testnet.ParseSyslog(buf[:n]); err != nil || perr == nil && m.MsgID == "access" {
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

// clientCounts is l4lb's /metrics lines about its clients: how they
// ended and why, and its backends' dials.
func clientCounts(t *testing.T, adminAddr string) string {
	t.Helper()
	resp := e2eutil.AdminGet(t, "http://"+adminAddr+"/metrics")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "l4lb_client_connections") || strings.HasPrefix(line, "l4lb_backend_dials_total") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
