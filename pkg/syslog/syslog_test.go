package syslog

import (
	"bytes"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
)

func open(t *testing.T, c Config) *Writer {
	t.Helper()
	w, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func mustAddress(t *testing.T, s string) Address {
	t.Helper()
	a, err := ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkHeader checks every header field of an access message sent at at.
func checkHeader(t *testing.T, m testnet.SyslogMessage, at time.Time, pri int) {
	t.Helper()
	if m.PRI != pri || !m.Time.Equal(at.Truncate(time.Microsecond)) || m.Host != "lb1.example" || m.App != "l4lb" ||
		m.ProcID != strconv.Itoa(os.Getpid()) || m.MsgID != "access" || m.SD != "-" {
		t.Fatalf("header %+v, want PRI %d, time %v, host lb1.example, l4lb, pid %d, access, -", m, pri, at, os.Getpid())
	}
}

// Over a unixgram socket and over UDP, a message is RFC 5424 with every
// field right, the body unchanged but for its newline.
func TestRFC5424OverUnixgramAndUDP(t *testing.T) {
	testnet.CheckLeaks(t)
	at := time.Date(2026, 12, 1, 18, 7, 23, 123456789, time.FixedZone("x", 3600))
	body := `{"time":"2026-12-01T17:07:23.123456Z","listener":"web","reason":"completed"}`
	cases := map[string]func(t *testing.T) (net.PacketConn, Address){
		"unixgram": func(t *testing.T) (net.PacketConn, Address) {
			path := testnet.UnixgramPath(t)
			return testnet.ListenUnixgram(t, path), mustAddress(t, "unixgram:"+path)
		},
		"udp": func(t *testing.T) (net.PacketConn, Address) {
			c, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c, mustAddress(t, "udp:"+c.LocalAddr().String())
		},
	}
	for name, listen := range cases {
		t.Run(name, func(t *testing.T) {
			c, addr := listen(t)
			local0, _ := ParseFacility("local0")
			w := open(t, Config{Address: addr, Facility: local0, MsgID: "access", Hostname: "lb1.example"})
			if !w.Send(SeverityInfo, at, []byte(body+"\n")) {
				t.Fatalf("not sent: %v", w.Dropped())
			}
			m := testnet.MustParseSyslog(t, testnet.ReadDatagram(t, c))
			checkHeader(t, m, at, 16*8+6)
			if m.Body != body {
				t.Fatalf("MSG %q, want %q", m.Body, body)
			}
		})
	}
}

// The local format is syslog(3)'s: no version, no hostname, the tag
// l4lb[PID].
func TestLocalFormat(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	c := testnet.ListenUnixgram(t, path)
	w := open(t, Config{Address: mustAddress(t, path), Format: FormatLocal, Facility: DefaultFacility})
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.Local)
	w.Send(SeverityWarning, at, []byte("hello\n"))
	want := "<28>Mar  4 05:06:07 l4lb[" + strconv.Itoa(os.Getpid()) + "]: hello"
	if got := string(testnet.ReadDatagram(t, c)); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A daemon that reads nothing fills its socket; every send after returns
// at once, dropped and counted as full, and none blocks.
func TestFullSocketDropsWithoutBlocking(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	c := testnet.ListenUnixgram(t, path)
	w := open(t, Config{Address: mustAddress(t, path)})
	body := bytes.Repeat([]byte("x"), 1000)
	const tries = 20000 // far more than a socket queues (max_dgram_qlen, the buffers)
	sent := 0
	for range tries {
		if w.Send(SeverityInfo, time.Now(), body) {
			sent++
		}
	}
	d := w.Dropped()
	if sent == 0 || sent == tries || d[ReasonFull] != int64(tries-sent) || d[ReasonUnreachable]+d[ReasonError] != 0 {
		t.Fatalf("sent %d of %d, drops %v: want some sent, the rest full", sent, tries, d)
	}
	// The daemon catches up: messages go out again on the same socket.
	buf := make([]byte, 65536)
	for range sent {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := c.ReadFrom(buf); err != nil {
			t.Fatal(err)
		}
	}
	if !w.Send(SeverityInfo, time.Now(), []byte("again")) {
		t.Fatalf("not sent once read: %v", w.Dropped())
	}
	if got := testnet.ReadDatagram(t, c); !bytes.HasSuffix(got, []byte(" again")) {
		t.Fatalf("got %q", got)
	}
}

// No daemon at the path: messages are dropped as unreachable, the socket
// tried at most once per RetryEvery on the writer's clock; once the daemon
// is there, the next try reaches it.
func TestAbsentSocketHealsAtTheNextRetry(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	w := open(t, Config{Address: mustAddress(t, path), Clock: clk})
	if w.Send(SeverityInfo, clk.Now(), []byte("lost")) || w.Connected() {
		t.Fatal("sent, or connected, with no socket")
	}
	c := testnet.ListenUnixgram(t, path)
	clk.Advance(RetryEvery - time.Millisecond)
	if w.Send(SeverityInfo, clk.Now(), []byte("too soon")) {
		t.Fatal("sent before the retry was due: the socket was tried again too soon")
	}
	clk.Advance(time.Millisecond)
	if !w.Send(SeverityInfo, clk.Now(), []byte("healed")) || !w.Connected() {
		t.Fatalf("not sent once due: %v", w.Dropped())
	}
	if m := testnet.MustParseSyslog(t, testnet.ReadDatagram(t, c)); m.Body != "healed" {
		t.Fatalf("got %q", m.Body)
	}
	if d := w.Dropped(); d[ReasonUnreachable] != 2 || d[ReasonFull]+d[ReasonError] != 0 {
		t.Fatalf("drops %v, want 2 unreachable", d)
	}
}

// A daemon that restarts (its socket closed, a new one at the path) loses
// no message: the refused send reopens the socket at once, the retry
// pacing allowing.
func TestDaemonRestartLosesNothing(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	clk := clock.NewFake(time.Unix(1e9, 0))
	c := testnet.ListenUnixgram(t, path)
	w := open(t, Config{Address: mustAddress(t, path), Clock: clk})
	w.Send(SeverityInfo, clk.Now(), []byte("one"))
	testnet.ReadDatagram(t, c)
	c.Close()
	os.Remove(path)
	c2 := testnet.ListenUnixgram(t, path)
	clk.Advance(RetryEvery)
	if !w.Send(SeverityInfo, clk.Now(), []byte("two")) {
		t.Fatalf("lost across the restart: %v", w.Dropped())
	}
	if m := testnet.MustParseSyslog(t, testnet.ReadDatagram(t, c2)); m.Body != "two" {
		t.Fatalf("got %q", m.Body)
	}
	// Gone for good: dropped as unreachable, and tried again only when due.
	c2.Close()
	os.Remove(path)
	for range 3 {
		if w.Send(SeverityInfo, clk.Now(), []byte("gone")) {
			t.Fatal("sent to no daemon")
		}
	}
	if d := w.Dropped(); d[ReasonUnreachable] != 3 {
		t.Fatalf("drops %v, want 3 unreachable", d)
	}
}

// A message over the transport's bound is cut at a rune boundary and
// ends in the marker, at exactly the bound.
func TestTruncation(t *testing.T) {
	testnet.CheckLeaks(t)
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := open(t, Config{Address: mustAddress(t, "udp:"+c.LocalAddr().String()), MsgID: "access"})
	body := []byte(strings.Repeat("é", MaxUDP)) // 2 bytes each
	w.Send(SeverityInfo, time.Now(), body)
	got := testnet.ReadDatagram(t, c)
	if len(got) > MaxUDP || len(got) < MaxUDP-1 || !bytes.HasSuffix(got, []byte(TruncatedMarker)) || !utf8.Valid(got) {
		t.Fatalf("%d bytes, ends %q, valid UTF-8 %v: want %d (or one less), the marker, valid", len(got), got[len(got)-20:], utf8.Valid(got), MaxUDP)
	}
	short := []byte("short")
	w.Send(SeverityInfo, time.Now(), short)
	if m := testnet.MustParseSyslog(t, testnet.ReadDatagram(t, c)); m.Body != "short" {
		t.Fatalf("got %q", m.Body)
	}
}

func TestParseAddress(t *testing.T) {
	good := map[string]Address{
		"/dev/log":                  {Network: NetworkUnixgram, Path: "/dev/log"},
		"unixgram:/run/syslog.sock": {Network: NetworkUnixgram, Path: "/run/syslog.sock"},
		"udp:127.0.0.1:514":         {Network: NetworkUDP, AddrPort: netipMust("127.0.0.1:514")},
		"udp:[::1]:5514":            {Network: NetworkUDP, AddrPort: netipMust("[::1]:5514")},
		"udp:[::ffff:10.0.0.1]:514": {Network: NetworkUDP, AddrPort: netipMust("10.0.0.1:514")},
	}
	for s, want := range good {
		got, err := ParseAddress(s)
		if err != nil || got != want {
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	bad := map[string]string{
		"":                             "use a socket path",
		"dev/log":                      "use a socket path",
		"tcp:127.0.0.1:514":            "use a socket path",
		"unixgram:log":                 "must be absolute",
		"udp:loghost:514":              "takes an IP address",
		"udp:127.0.0.1":                "takes an IP address",
		"udp:127.0.0.1:0":              "port 0",
		"udp:[fe80::1%eth0]:514":       "zone",
		"/" + strings.Repeat("a", 200): "at most 107 bytes",
	}
	for s, want := range bad {
		if _, err := ParseAddress(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAddress(%q): %v, want an error saying %q", s, err, want)
		}
	}
}

func TestFacilities(t *testing.T) {
	for i, name := range FacilityNames() {
		f, err := ParseFacility(name)
		if err != nil || int(f) != i || f.String() != name {
			t.Errorf("%s: %d, %v; want %d", name, f, err, i)
		}
	}
	if f, _ := ParseFacility("daemon"); f != DefaultFacility {
		t.Errorf("daemon is %d, DefaultFacility %d", f, DefaultFacility)
	}
	if _, err := ParseFacility("local8"); err == nil || !strings.Contains(err.Error(), "local7") {
		t.Errorf("local8: %v", err)
	}
	if _, err := Open(Config{Address: Address{Network: NetworkUnixgram, Path: "/nonexistent"}, Format: "rfc3164"}); err == nil {
		t.Error("format rfc3164 accepted")
	}
}

func TestClosedWriterDrops(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	testnet.ListenUnixgram(t, path)
	w := open(t, Config{Address: mustAddress(t, path)})
	w.Close()
	if w.Send(SeverityInfo, time.Now(), []byte("late")) {
		t.Fatal("sent after Close")
	}
	if d := w.Dropped(); d[ReasonError] != 1 {
		t.Fatalf("drops %v", d)
	}
}
