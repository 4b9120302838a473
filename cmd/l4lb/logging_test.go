package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
)

// check names the key of a syslog address run could not use.
func TestCheckRefusesBadSyslogAddresses(t *testing.T) {
	for addr, want := range map[string]string{
		"udp:loghost:514":  "udp:IP:PORT takes an IP address",
		"localhost:514":    "use a socket path (/dev/log), unixgram:/path or udp:IP:PORT",
		"unixgram:dev/log": "the socket path must be absolute",
	} {
		src := onePool([]string{"127.0.0.1:8080"}, "", "addr = \"127.0.0.1:9001\"\n") +
			"[log]\naccess = \"syslog\"\nsyslog = \"" + addr + "\"\n"
		code, _, stderr := checkFile(t, src)
		if code != 1 || !strings.Contains(stderr, "log.syslog") || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want 1 naming log.syslog and saying %q", addr, code, stderr, want)
		}
	}
}

// process = "syslog": the process log's records are messages with MSGID
// process and their level's severity, none on standard error; closing
// lets the socket go.
func TestProcessLogToSyslog(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	daemon := testnet.ListenUnixgram(t, path)
	c := config.DefaultLog()
	c.Process, c.Syslog, c.SyslogFacility = config.ProcessSyslog, path, "local2"
	var stderr bytes.Buffer
	log, closeLog := newLogger(c, &stderr)
	log.Warn("backend down", "backend", "10.0.0.1:80")
	log.Debug("not at level info")
	closeLog()
	log.Error("after close: dropped")

	got := string(testnet.ReadDatagram(t, daemon))
	if !strings.HasPrefix(got, "<148>1 ") || !strings.Contains(got, " l4lb ") ||
		!strings.HasSuffix(got, ` process - level=WARN msg="backend down" backend=10.0.0.1:80`) {
		t.Fatalf("got %q: want local2.warning (148), MSGID process, the line without its time", got)
	}
	buf := make([]byte, 65536)
	daemon.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := daemon.ReadFrom(buf); err == nil {
		t.Fatalf("a second message %q: debug is below info, and the writer was closed", buf[:n])
	}
	if stderr.Len() != 0 {
		t.Fatalf("standard error got %q", stderr.String())
	}
}
