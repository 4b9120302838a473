package accesslog

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var sample = Record{
	End:      time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC).UnixNano(),
	Duration: 3512345 * time.Nanosecond,
	Listener: "web", Pool: "web-pool",
	Client:  netip.MustParseAddrPort("192.0.2.7:51234"),
	Backend: "10.0.0.1:8080", ToBackend: 64, ToClient: 1024,
	Reason: "completed", Result: "ok",
}

// A TCP close record is the line of the format before events: in JSON
// every field in its order with event and proto appended, in text the
// very same line (event is written only when not close, proto only for
// UDP), so a parser of the older format reads it as before.
func TestFormats(t *testing.T) {
	refused := sample
	refused.Client = netip.MustParseAddrPort("[2001:db8::1]:443")
	refused.Backend, refused.ToBackend, refused.ToClient, refused.Duration = "", 0, 0, 0
	refused.Reason, refused.Result = "connection_cap", "rejected"
	for _, tc := range []struct {
		r          Record
		json, text string
	}{
		{sample,
			`{"time":"2024-05-01T12:00:00.123456Z","listener":"web","pool":"web-pool","client":"192.0.2.7:51234","backend":"10.0.0.1:8080","to_backend":64,"to_client":1024,"duration":0.003512,"reason":"completed","result":"ok"`,
			`time=2024-05-01T12:00:00.123456Z listener=web pool=web-pool client=192.0.2.7:51234 backend=10.0.0.1:8080 to_backend=64 to_client=1024 duration=0.003512 reason=completed result=ok`},
		{refused,
			`{"time":"2024-05-01T12:00:00.123456Z","listener":"web","pool":"web-pool","client":"[2001:db8::1]:443","backend":"","to_backend":0,"to_client":0,"duration":0.000000,"reason":"connection_cap","result":"rejected"`,
			`time=2024-05-01T12:00:00.123456Z listener=web pool=web-pool client=[2001:db8::1]:443 backend="" to_backend=0 to_client=0 duration=0.000000 reason=connection_cap result=rejected`},
	} {
		checkLine(t, &tc.r, tc.json+`,"event":"close","proto":"tcp"}`, tc.text)
	}
}

func checkLine(t *testing.T, r *Record, wantJSON, wantText string) {
	t.Helper()
	if got := string(AppendJSON(nil, r)); got != wantJSON+"\n" {
		t.Errorf("json:\n got %s\nwant %s", got, wantJSON)
	}
	if !json.Valid(AppendJSON(nil, r)) {
		t.Errorf("json line is not valid JSON")
	}
	if got := string(AppendText(nil, r)); got != wantText+"\n" {
		t.Errorf("text:\n got %s\nwant %s", got, wantText)
	}
}

// Records of open connections have no reason or result yet (written ""),
// a UDP session's has its datagrams each way after proto, and the SNI
// fields stay where they were, before event. Text leaves out event=close
// and proto=tcp, JSON writes both always.
func TestFormatsOfEvents(t *testing.T) {
	interim := sample
	interim.Event, interim.Reason, interim.Result = EventInterim, "", ""
	connect := interim
	connect.Event, connect.ToBackend, connect.ToClient = EventConnect, 0, 0
	connect.Route, connect.ServerName = "api", "api.example.com"
	// A routing listener's client with no server name: JSON still has
	// both keys (every key, for a parser's schema), text leaves them out.
	unnamed := sample
	unnamed.Routed = true
	udp := sample
	udp.UDP, udp.Reason, udp.DatagramsToBackend, udp.DatagramsToClient = true, "timeout", 2, 3
	udpInterim := udp
	udpInterim.Event, udpInterim.Reason, udpInterim.Result = EventInterim, "", ""
	const head = `{"time":"2024-05-01T12:00:00.123456Z","listener":"web","pool":"web-pool","client":"192.0.2.7:51234","backend":"10.0.0.1:8080",`
	const textHead = `time=2024-05-01T12:00:00.123456Z listener=web pool=web-pool client=192.0.2.7:51234 backend=10.0.0.1:8080 `
	for _, tc := range []struct {
		r          Record
		json, text string
	}{
		{interim,
			head + `"to_backend":64,"to_client":1024,"duration":0.003512,"reason":"","result":"","event":"interim","proto":"tcp"}`,
			textHead + `to_backend=64 to_client=1024 duration=0.003512 reason="" result="" event=interim`},
		{connect,
			head + `"to_backend":0,"to_client":0,"duration":0.003512,"reason":"","result":"","route":"api","server_name":"api.example.com","event":"connect","proto":"tcp"}`,
			textHead + `to_backend=0 to_client=0 duration=0.003512 reason="" result="" route=api server_name=api.example.com event=connect`},
		{unnamed,
			head + `"to_backend":64,"to_client":1024,"duration":0.003512,"reason":"completed","result":"ok","route":"","server_name":"","event":"close","proto":"tcp"}`,
			textHead + `to_backend=64 to_client=1024 duration=0.003512 reason=completed result=ok`},
		{udp,
			head + `"to_backend":64,"to_client":1024,"duration":0.003512,"reason":"timeout","result":"ok","event":"close","proto":"udp","datagrams_to_backend":2,"datagrams_to_client":3}`,
			textHead + `to_backend=64 to_client=1024 duration=0.003512 reason=timeout result=ok proto=udp datagrams_to_backend=2 datagrams_to_client=3`},
		{udpInterim,
			head + `"to_backend":64,"to_client":1024,"duration":0.003512,"reason":"","result":"","event":"interim","proto":"udp","datagrams_to_backend":2,"datagrams_to_client":3}`,
			textHead + `to_backend=64 to_client=1024 duration=0.003512 reason="" result="" event=interim proto=udp datagrams_to_backend=2 datagrams_to_client=3`},
	} {
		checkLine(t, &tc.r, tc.json, tc.text)
	}
	if s := Event(200).String(); s != "unknown" {
		t.Errorf("Event(200) is %q, want unknown", s)
	}
}

// Odd names (the config allows none, but the writer must not break) are
// escaped in JSON and quoted in text.
func TestFormatsEscape(t *testing.T) {
	r := sample
	r.Listener = "a \"b\"\\\n\x01é\xff"
	var m map[string]any
	if err := json.Unmarshal(AppendJSON(nil, &r), &m); err != nil {
		t.Fatal(err)
	}
	if m["listener"] != "a \"b\"\\\n\x01é\ufffd" {
		t.Errorf("listener decoded as %q", m["listener"])
	}
	line := string(AppendText(nil, &r))
	if !strings.Contains(line, ` listener="a \"b\"\\\n\x01é\xff" `) || strings.Count(line, "\n") != 1 {
		t.Errorf("text line %q", line)
	}
	long := sample
	long.Listener, long.Pool, long.Route = strings.Repeat("l", 64), strings.Repeat("p", 64), strings.Repeat("r", 64)
	long.ServerName = strings.Repeat("\x01", 255) // 6 bytes each, escaped
	long.Client = netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%eth0]:65535")
	long.Backend = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
	long.ToBackend, long.ToClient, long.DatagramsToBackend, long.DatagramsToClient = -1<<63, -1<<63, -1<<63, -1<<63
	long.Reason, long.Result, long.UDP = "source_connections", "rejected", true
	if n := len(AppendJSON(nil, &long)); n > maxLine {
		t.Errorf("a line of %d bytes is longer than maxLine", n)
	}
}

// syncBuffer records every write.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes []int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, len(p))
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Records pushed by two loops are all written, in whole lines, each write
// at most 4 KiB to a shared stream; Close writes what is still queued.
func TestWriterWritesWholeLines(t *testing.T) {
	out := &syncBuffer{}
	l, err := Open(Config{Format: FormatJSON, Out: out, Loops: 2, QueueSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const each = 1000
	var wg sync.WaitGroup
	for id := range 2 {
		wg.Go(func() {
			for i := range each {
				r := sample
				r.ToBackend = int64(id*each + i)
				l.Queue().Push(id, &r)
				if i%100 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		seen[int64(m["to_backend"].(float64))] = true
	}
	if len(seen)+int(l.Dropped()) != 2*each || l.Dropped() != 0 {
		t.Fatalf("%d records written, %d dropped; want all %d written", len(seen), l.Dropped(), 2*each)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	for _, n := range out.writes {
		if n > 4096 {
			t.Fatalf("a write of %d bytes to a shared stream", n)
		}
	}
}

// A file is appended to, and reopened at its path once a rotator has
// moved it away.
func TestFileIsReopenedAfterRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	if err := os.WriteFile(path, []byte("earlier line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Config{Format: FormatText, Path: path, Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	push := func(client string) {
		r := sample
		r.Client = netip.MustParseAddrPort(client)
		l.Queue().Push(0, &r)
	}
	contains := func(p, s string) func() bool {
		return func() bool { b, _ := os.ReadFile(p); return strings.Contains(string(b), s) }
	}
	push("192.0.2.1:1")
	waitFor(t, "the first line", contains(path, "client=192.0.2.1:1 "))
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), "earlier line\n") {
		t.Fatalf("the file was not appended to: %q", b)
	}
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	// Lines go on to the rotated file until the writer looks at the path
	// again (at most a second), then to a new file at the path.
	for i := 2; ; i++ {
		client := "192.0.2.1:" + strconv.Itoa(i)
		push(client)
		waitFor(t, "line "+client, func() bool { return contains(path, client+" ")() || contains(rotated, client+" ")() })
		if contains(path, client+" ")() {
			break
		}
		if i > 100 {
			t.Fatal("the writer never reopened the path")
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("new access log mode %v, want 0640", st.Mode().Perm())
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Config{Format: "xml"}); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("format xml: %v", err)
	}
	_, err := Open(Config{Format: FormatJSON, Path: filepath.Join(t.TempDir(), "missing", "access.log")})
	if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("a path in a missing directory: %v", err)
	}
}

// fullDisk takes bytes until its room runs out, then fails as a full disk
// does: a write that does not fit is cut short.
type fullDisk struct {
	mu   sync.Mutex
	room int
	b    bytes.Buffer
}

func (d *fullDisk) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := min(len(p), d.room)
	d.b.Write(p[:n])
	d.room -= n
	if n < len(p) {
		return n, syscall.ENOSPC
	}
	return n, nil
}

// A write cut short loses only the lines it did not write whole: the
// lines before the cut are on disk and must not count as dropped.
func TestPartialWriteDropsOnlyUnwrittenLines(t *testing.T) {
	line := len(AppendText(nil, &sample))
	disk := &fullDisk{room: 3*line + line/2}
	l, err := Open(Config{Format: FormatText, Out: disk, Loops: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		r := sample
		l.Queue().Push(0, &r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.Dropped(); got != 7 {
		t.Errorf("dropped %d records, want 7 (3 of 10 were written whole)", got)
	}
	if whole := strings.Count(disk.b.String(), "\n"); whole != 3 {
		t.Errorf("%d whole lines on disk, want 3", whole)
	}
}
