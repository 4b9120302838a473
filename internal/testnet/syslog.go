package testnet

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// SyslogMessage is an RFC 5424 message taken apart.
type SyslogMessage struct {
	PRI                                int
	Time                               time.Time
	Host, App, ProcID, MsgID, SD, Body string
}

// rfc5424 is RFC 5424's header as l4lb writes it: VERSION 1, the
// TIMESTAMP in UTC with microseconds.
var rfc5424 = regexp.MustCompile(`(?s)^<(\d{1,3})>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (\S+) (\S+) (\S+) (\S+) (-|\[.*?\]) (.*)$`)

// ParseSyslog takes an RFC 5424 message apart; an error quotes what is
// not one.
func ParseSyslog(b []byte) (SyslogMessage, error) {
	m := rfc5424.FindSubmatch(b)
	if m == nil {
		return SyslogMessage{}, fmt.Errorf("not an RFC 5424 message (VERSION 1, UTC microseconds): %q", b)
	}
	pri, err := strconv.Atoi(string(m[1]))
	if err != nil || pri > 191 {
		return SyslogMessage{}, fmt.Errorf("PRI %s: %q", m[1], b)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(m[2]))
	if err != nil {
		return SyslogMessage{}, fmt.Errorf("TIMESTAMP %s: %v", m[2], err)
	}
	return SyslogMessage{PRI: pri, Time: ts, Host: string(m[3]), App: string(m[4]), ProcID: string(m[5]),
		MsgID: string(m[6]), SD: string(m[7]), Body: string(m[8])}, nil
}

// MustParseSyslog is ParseSyslog, failing the test on an error.
func MustParseSyslog(t testing.TB, b []byte) SyslogMessage {
	t.Helper()
	m, err := ParseSyslog(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// UnixgramPath is a path for a unixgram socket in a directory of its own,
// removed when the test ends: short, as a socket path has at most 107
// bytes and a test's TempDir carries its name.
func UnixgramPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dgram")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "sock")
}

// ListenUnixgram listens on a unixgram socket at path, as a syslog
// daemon's /dev/log does, until the test ends.
func ListenUnixgram(t testing.TB, path string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ReadDatagram reads one datagram from c, failing the test at a generous
// deadline.
func ReadDatagram(t testing.TB, c net.PacketConn) []byte {
	t.Helper()
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, _, err := c.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no datagram: %v", err)
	}
	return buf[:n]
}
