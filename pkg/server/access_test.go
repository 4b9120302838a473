package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/relay"
)

// lineBuffer is an access log's destination in a test.
type lineBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// claimed are the lines lineFor returned: a client port the kernel
	// hands out again later is another client, with a line of its own.
	claimed map[int]bool
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(p) == 0 || p[len(p)-1] != '\n' {
		return 0, fmt.Errorf("a write of %d bytes that does not end a line", len(p))
	}
	return l.b.Write(p)
}

func (l *lineBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSuffix(l.b.String(), "\n"), "\n")
}

// accessLine is one JSON access line, decoded.
type accessLine map[string]any

// jsonLines decodes every line; a line that is not one JSON object
// fails the test.
func jsonLines(t *testing.T, buf *lineBuffer) []accessLine {
	t.Helper()
	var out []accessLine
	for _, s := range buf.lines() {
		if s == "" {
			continue
		}
		var m accessLine
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("access line %q is not JSON: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

// startAccessLog writes s's access log as format into a buffer, closed
// when the test ends (before the server's own cleanup shuts it down).
func startAccessLog(t *testing.T, s *Server, format string) (*accesslog.Log, *lineBuffer) {
	t.Helper()
	buf := &lineBuffer{}
	alog, err := accesslog.Open(accesslog.Config{Format: format, Out: buf, Loops: s.Loops()})
	if err != nil {
		t.Fatal(err)
	}
	s.SetAccessLog(alog.Queue())
	t.Cleanup(func() {
		s.SetAccessLog(nil)
		alog.Close()
	})
	return alog, buf
}

// lineFor waits for the access line of the client whose local address is
// client: the first such line no earlier call returned.
func lineFor(t *testing.T, buf *lineBuffer, client string) accessLine {
	t.Helper()
	var found accessLine
	testnet.Eventually(t, "the access line of client "+client, func() bool {
		for i, m := range jsonLines(t, buf) {
			if m["client"] == client && !buf.claimed[i] {
				if buf.claimed == nil {
					buf.claimed = map[int]bool{}
				}
				buf.claimed[i] = true
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// accessKeys are an ended TCP client's access line fields, in their
// order: those of the first format, then event and proto, appended.
var accessKeys = []string{"time", "listener", "pool", "client", "backend", "to_backend", "to_client", "duration", "reason", "result", "event", "proto"}

// checkLine checks every field of an access line: the fixed ones exactly,
// the time within [before, now] and the duration within [minDur, the time
// since before].
func checkLine(t *testing.T, m accessLine, want map[string]any, before time.Time, minDur time.Duration) {
	t.Helper()
	keys := accessKeys
	if len(m) != len(keys) {
		t.Errorf("access line has %d fields, want %d (%v): %v", len(m), len(keys), keys, m)
	}
	if m["event"] != "close" || m["proto"] != "tcp" {
		t.Errorf("access line of an ended TCP client with event %v, proto %v: want close, tcp", m["event"], m["proto"])
	}
	for k, v := range want {
		got := fmt.Sprint(m[k])
		if got != fmt.Sprint(v) {
			t.Errorf("access line %s = %q, want %q (line %v)", k, got, fmt.Sprint(v), m)
		}
	}
	ts, _ := m["time"].(string)
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || !strings.HasSuffix(ts, "Z") {
		t.Errorf("access line time %q: not RFC 3339 in UTC (%v)", ts, err)
	} else if at.Before(before.Add(-time.Millisecond)) || at.After(time.Now()) {
		t.Errorf("access line time %v outside [%v, now]", at, before)
	}
	n, ok := m["duration"].(json.Number)
	if !ok {
		t.Fatalf("access line duration %v is not a number", m["duration"])
	}
	secs, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	d := time.Duration(secs * float64(time.Second))
	if d < minDur || d > time.Since(before) {
		t.Errorf("access line duration %v, want at least %v and at most the %v since the test began", d, minDur, time.Since(before))
	}
}

// accessTOML: listener "front" (pool p, to backend), "relay" (pool relay,
// to taker), "idle" (pool idle, to taker with a 300 ms idle timeout),
// "dead" (nothing listens behind it), "frozen" (a backend that never
// completes a handshake). No health checks: every connection the backends
// see is a client's.
func accessTOML(t *testing.T, backend, taker, frozen string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("[admin]\nlisten = \"\"\n")
	for _, name := range []string{"front", "relay", "idle", "dead", "frozen"} {
		pool := name
		if name == "front" {
			pool = "p"
		}
		fmt.Fprintf(&b, "[[listener]]\nname = %q\nbind = %q\npool = %q\n", name, testnet.FreeAddr(t), pool)
	}
	for _, p := range []struct{ name, addr, keys string }{
		{"p", backend, ""},
		{"relay", taker, ""},
		{"idle", taker, "idle_timeout = \"300ms\"\n"},
		{"dead", closedAddr(t), ""},
		{"frozen", frozen, "connect_timeout = \"10s\"\nconnect_budget = \"10s\"\n"},
	} {
		fmt.Fprintf(&b, "[pool.%s]\nretries = 0\n%s[pool.%s.health]\nenabled = false\n[[pool.%s.backend]]\naddr = %q\n",
			p.name, p.keys, p.name, p.name, p.addr)
	}
	return b.String()
}

func (l *lb) bind(t *testing.T, listener string) string {
	t.Helper()
	a, err := l.server.Addr(listener)
	if err != nil {
		t.Fatal(err)
	}
	return a.String()
}

// Every way a TCP client ends leaves one JSON line with every field right,
// and counts once under its reason: a completed relay, a client reset, a
// backend reset, an idle timeout, a client that leaves mid-dial, a client
// no backend could be dialed for, and a relay cut at the shutdown
// deadline.
func TestAccessLogLineForEveryEnd(t *testing.T) {
	noLeaks(t)
	echo := testnet.StartBackend(t, "b", "")
	k := testnet.StartTaker(t)
	frozen := testnet.FrozenBackend(t)
	l := startLB(t, accessTOML(t, echo.Addr, k.Addr, frozen), 0)
	_, buf := startAccessLog(t, l.server, accesslog.FormatJSON)
	before := time.Now()
	front := l.bind(t, "front")
	base := func(listener, pool, client string) map[string]any {
		return map[string]any{"listener": listener, "pool": pool, "client": client}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}

	// Completed: the tag line and an echo, then both sides half-close.
	c := dial(t, front)
	r := bufio.NewReader(c)
	if tag, err := r.ReadString('\n'); err != nil || tag != "b\n" {
		t.Fatalf("tag %q, %v", tag, err)
	}
	c.Write([]byte("hello"))
	if _, err := io.ReadFull(r, make([]byte, 5)); err != nil {
		t.Fatalf("no echo: %v", err)
	}
	// A deliberate pause: the relay lasts at least 100ms, so checkLine's
	// lower bound on its duration tells a measured duration from a zero
	// (load only lengthens it; the upper bound is the test's own span).
	time.Sleep(100 * time.Millisecond)
	c.CloseWrite()
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close: %q, %v; want a clean end", rest, err)
	}
	c.Close()
	checkLine(t, lineFor(t, buf, c.LocalAddr().String()), with(base("front", "p", c.LocalAddr().String()),
		"backend", echo.Addr, "to_backend", 5, "to_client", 7, "reason", "completed", "result", "ok"), before, 100*time.Millisecond)

	// A client reset, after 4 bytes reached the backend.
	relayed := l.bind(t, "relay")
	cr := dial(t, relayed)
	be := k.Next(t)
	cr.Write([]byte("ping"))
	be.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(be, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	cr.SetLinger(0)
	cr.Close()
	checkLine(t, lineFor(t, buf, cr.LocalAddr().String()), with(base("relay", "relay", cr.LocalAddr().String()),
		"backend", k.Addr, "to_backend", 4, "to_client", 0, "reason", "client_reset", "result", "ok"), before, 0)
	be.Close()

	// A backend reset, after 3 bytes each way.
	br := dial(t, relayed)
	be = k.Next(t)
	br.Write([]byte("abc"))
	be.Write([]byte("xyz"))
	for _, side := range []*net.TCPConn{br, be} {
		side.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(side, make([]byte, 3)); err != nil {
			t.Fatal(err)
		}
	}
	be.SetLinger(0)
	be.Close()
	br.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(br); !isReset(err) {
		t.Fatalf("client of a backend that reset: %v, want a reset", err)
	}
	br.Close()
	checkLine(t, lineFor(t, buf, br.LocalAddr().String()), with(base("relay", "relay", br.LocalAddr().String()),
		"backend", k.Addr, "to_backend", 3, "to_client", 3, "reason", "backend_reset", "result", "ok"), before, 0)

	// An idle timeout: nothing moves for 300 ms.
	it := dial(t, l.bind(t, "idle"))
	be = k.Next(t)
	it.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(it); !isReset(err) {
		t.Fatalf("client of an idle relay: %v, want a reset", err)
	}
	it.Close()
	be.Close()
	checkLine(t, lineFor(t, buf, it.LocalAddr().String()), with(base("idle", "idle", it.LocalAddr().String()),
		"backend", k.Addr, "to_backend", 0, "to_client", 0, "reason", "idle_timeout", "result", "ok"), before, 300*time.Millisecond)

	// No backend could be dialed.
	nb := dial(t, l.bind(t, "dead"))
	nb.SetReadDeadline(time.Now().Add(20 * time.Second))
	io.ReadAll(nb)
	nb.Close()
	checkLine(t, lineFor(t, buf, nb.LocalAddr().String()), with(base("dead", "dead", nb.LocalAddr().String()),
		"backend", "", "to_backend", 0, "to_client", 0, "reason", "no_backend", "result", "failed"), before, 0)

	// A client that resets while its backend is being dialed.
	cl := dial(t, l.bind(t, "frozen"))
	waitDialing(t, l, l.pools["frozen"].Backends()[0], 1)
	cl.SetLinger(0)
	cl.Close()
	checkLine(t, lineFor(t, buf, cl.LocalAddr().String()), with(base("frozen", "frozen", cl.LocalAddr().String()),
		"backend", "", "to_backend", 0, "to_client", 0, "reason", "client_left", "result", "rejected"), before, 0)

	// A relay still open when the drain runs out of time.
	sd := dial(t, front)
	bufio.NewReader(sd).ReadString('\n')
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := l.server.Shutdown(ctx); err == nil {
		t.Fatal("shutdown with an open relay past its deadline returned nil")
	}
	sd.Close()
	checkLine(t, lineFor(t, buf, sd.LocalAddr().String()), with(base("front", "p", sd.LocalAddr().String()),
		"backend", echo.Addr, "to_backend", 0, "to_client", 2, "reason", "shutdown", "result", "ok"), before, 0)

	// One line per client, and the same ends in the counters.
	if lines := jsonLines(t, buf); len(lines) != 7 {
		t.Errorf("%d access lines, want 7 (one per client): %v", len(lines), lines)
	}
	want := map[string]map[relay.CloseReason]int64{
		"front":  {relay.CloseCompleted: 1, relay.CloseShutdown: 1},
		"relay":  {relay.CloseClientReset: 1, relay.CloseBackendReset: 1},
		"idle":   {relay.CloseIdleTimeout: 1},
		"dead":   {relay.CloseNoBackend: 1},
		"frozen": {relay.CloseClientLeft: 1},
	}
	checkCloses(t, l.server, want)
}

// checkCloses checks every listener's close counters against want (absent
// reasons: 0) and against the listener's results: every client ended once.
func checkCloses(t *testing.T, s *Server, want map[string]map[relay.CloseReason]int64) {
	t.Helper()
	stats := map[string]ListenerStats{}
	for _, st := range s.Stats() {
		stats[st.Name] = st
	}
	for _, lc := range s.Closes() {
		var sum int64
		for r := range relay.NumCloseReasons {
			sum += lc.Closed[r]
			if lc.Closed[r] != want[lc.Name][r] {
				t.Errorf("listener %s: %d closed as %s, want %d", lc.Name, lc.Closed[r], r, want[lc.Name][r])
			}
		}
		st := stats[lc.Name]
		if n := st.OK + st.Failed + st.Rejected; sum != n {
			t.Errorf("listener %s: %d closes counted, but %d clients by result (%+v)", lc.Name, sum, n, st)
		}
	}
}

// A client refused at the connection cap gets a line saying so, with no
// backend, and counts as connection_cap.
func TestAccessLogRefusalAtTheCap(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, "[pool.p.health]\nenabled = false\n"), 1)
	_, buf := startAccessLog(t, l.server, accesslog.FormatJSON)
	before := time.Now()
	held := dial(t, l.addr)
	defer held.Close()
	if tag, _ := bufio.NewReader(held).ReadString('\n'); tag != "b\n" {
		t.Fatal("the connection under the cap was not served")
	}
	over := dial(t, l.addr)
	over.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection over the cap read %d bytes, %v; want a clean close", n, err)
	}
	over.Close()
	checkLine(t, lineFor(t, buf, over.LocalAddr().String()), map[string]any{
		"listener": "front", "pool": "p", "client": over.LocalAddr().String(), "backend": "",
		"to_backend": 0, "to_client": 0, "duration": "0.000000", "reason": "connection_cap", "result": "rejected",
	}, before, 0)
	held.Close()
	testnet.Eventually(t, "the held connection to end", func() bool { return l.server.Active() == 0 })
	lineFor(t, buf, held.LocalAddr().String())
	checkCloses(t, l.server, map[string]map[relay.CloseReason]int64{"front": {relay.CloseConnectionCap: 1, relay.CloseCompleted: 1}})
}

// A backend that leads back to l4lb itself: the connection l4lb made to
// itself is cut as a loop, with a line and a count.
func TestAccessLogLoop(t *testing.T) {
	noLeaks(t)
	bind := testnet.FreeAddr(t)
	text := poolTOML(t, "round-robin", []string{"127.0.0.1:1"}, "retries = 0\n[pool.p.health]\nenabled = false\n")
	cfg, err := config.Parse("loop.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pools["p"].Backends[0].Addr = bind // past the config checks on purpose
	p, err := pool.New(cfg.Pools["p"], pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Frontends: []Frontend{{Name: "front", Bind: bind, Pool: p}}, Loops: 1, MaxConnections: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	_, buf := startAccessLog(t, s, accesslog.FormatJSON)
	if c, err := net.DialTimeout("tcp", bind, 5*time.Second); err == nil {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		io.ReadAll(c)
		c.Close()
	}
	testnet.Eventually(t, "every connection to end", func() bool { return s.Active() == 0 })
	st := s.Stats()[0]
	testnet.Eventually(t, "a line per accepted client", func() bool {
		return int64(len(jsonLines(t, buf))) == st.OK+st.Failed+st.Rejected
	})
	loops := 0
	for _, m := range jsonLines(t, buf) {
		if m["reason"] == "loop" {
			loops++
			if m["result"] != "rejected" || m["backend"] != "" || m["listener"] != "front" {
				t.Errorf("loop line %v: want result rejected, no backend, listener front", m)
			}
		}
	}
	if loops == 0 || int64(loops) != st.Loops {
		t.Fatalf("%d loop lines, %d loops counted (%+v); want them equal and above 0", loops, st.Loops, st)
	}
	if n := s.Closes()[0].Closed[relay.CloseLoop]; n != st.Loops {
		t.Fatalf("%d closes counted as loop, %d loops", n, st.Loops)
	}
}

// The text format carries the same fields as key=value pairs, in order.
func TestAccessLogTextLine(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, "[pool.p.health]\nenabled = false\n"), 0)
	_, buf := startAccessLog(t, l.server, accesslog.FormatText)
	before := time.Now()
	c := dial(t, l.addr)
	r := bufio.NewReader(c)
	r.ReadString('\n')
	c.Write([]byte("0123456789"))
	io.ReadFull(r, make([]byte, 10))
	c.CloseWrite()
	io.ReadAll(r)
	c.Close()
	client := c.LocalAddr().String()
	var line string
	testnet.Eventually(t, "the text line", func() bool {
		for _, s := range buf.lines() {
			if strings.Contains(s, " client="+client+" ") {
				line = s
				return true
			}
		}
		return false
	})
	fields := strings.Fields(line)
	// Text leaves event=close and proto=tcp out: the line of the first
	// format, byte for byte.
	keys := accessKeys[:len(accessKeys)-2]
	if len(fields) != len(keys) {
		t.Fatalf("text line %q has %d fields, want %d", line, len(fields), len(keys))
	}
	m := accessLine{}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != keys[i] {
			t.Fatalf("text line %q: field %d is %q, want %s=...", line, i, f, keys[i])
		}
		m[k] = v
	}
	m["duration"] = json.Number(m["duration"].(string))
	m["event"], m["proto"] = "close", "tcp" // what their absence says
	checkLine(t, m, map[string]any{"listener": "front", "pool": "p", "client": client, "backend": b.Addr,
		"to_backend": 10, "to_client": 12, "reason": "completed", "result": "ok"}, before, 0)
}

// stuckWriter blocks every write until released.
type stuckWriter struct {
	release chan struct{}
	entered chan struct{}
	once    sync.Once
	lineBuffer
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return w.lineBuffer.Write(p)
}

// A writer that cannot write never holds up the loops: connections go on
// being served, records past the queue's room are dropped and counted,
// and every record is either written (once the writer moves) or counted
// as dropped.
func TestAccessLogDropsWhenTheWriterIsStuck(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, "[pool.p.health]\nenabled = false\n"), 0)
	w := &stuckWriter{release: make(chan struct{}), entered: make(chan struct{})}
	alog, err := accesslog.Open(accesslog.Config{Format: accesslog.FormatJSON, Out: w, Loops: l.server.Loops(), QueueSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	l.server.SetAccessLog(alog.Queue())
	released := false
	t.Cleanup(func() {
		if !released {
			close(w.release)
		}
		l.server.SetAccessLog(nil)
		alog.Close()
	})
	capacity := int64(alog.Queue().Capacity())
	const clients = 200
	for i := range clients {
		if tag, err := testnet.Hello(l.addr, ""); err != nil || tag != "b" {
			t.Fatalf("client %d not served while the access log is stuck: %q, %v", i, tag, err)
		}
	}
	testnet.Eventually(t, "every client to end", func() bool { return l.server.Active() == 0 })
	select {
	case <-w.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the writer never began to write")
	}
	dropped := alog.Dropped()
	// The batch the writer took before it stuck (at most the queue's
	// room) and the queue's room can be waiting; the rest were dropped.
	if dropped < clients-2*capacity {
		t.Fatalf("%d records dropped with a stuck writer and room for %d, want at least %d", dropped, capacity, clients-2*capacity)
	}
	if got := l.server.AccessLogDropped(); got != dropped {
		t.Fatalf("server reports %d dropped, the log %d", got, dropped)
	}
	close(w.release)
	released = true
	l.server.SetAccessLog(nil)
	if err := alog.Close(); err != nil {
		t.Fatal(err)
	}
	written := int64(0)
	for _, s := range w.lines() {
		if s != "" {
			written++
		}
	}
	if written+alog.Dropped() != clients {
		t.Fatalf("%d lines written + %d dropped = %d, want one per client (%d)", written, alog.Dropped(), written+alog.Dropped(), clients)
	}
	if written > 2*capacity || written == 0 {
		t.Fatalf("%d lines written past a stuck writer with room for %d, want 1 to %d", written, capacity, 2*capacity)
	}
}

// Without an access log the close counters count all the same, and the
// dropped count is 0.
func TestClosesCountedWithTheAccessLogOff(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, "[pool.p.health]\nenabled = false\n"), 0)
	for range 3 {
		c := dial(t, l.addr)
		r := bufio.NewReader(c)
		r.ReadString('\n')
		c.CloseWrite()
		io.ReadAll(r)
		c.Close()
	}
	c := dial(t, l.addr)
	bufio.NewReader(c).ReadString('\n')
	c.SetLinger(0)
	c.Close()
	testnet.Eventually(t, "every client to end", func() bool {
		return l.server.Active() == 0 && l.server.Closes()[0].Closed[relay.CloseClientReset] == 1
	})
	checkCloses(t, l.server, map[string]map[relay.CloseReason]int64{"front": {relay.CloseCompleted: 3, relay.CloseClientReset: 1}})
	if n := l.server.AccessLogDropped(); n != 0 {
		t.Fatalf("dropped = %d with the access log off", n)
	}
}

// Every client dial that connects is timed into its backend's histogram.
func TestConnectTimesCounted(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, "[pool.p.health]\nenabled = false\n"), 0)
	const clients = 20
	for range clients {
		if tag, err := testnet.Hello(l.addr, ""); err != nil || tag != "b" {
			t.Fatalf("%q, %v", tag, err)
		}
	}
	be := l.pools["p"].Backends()[0]
	testnet.Eventually(t, "every client to end", func() bool { return l.server.Active() == 0 })
	h := be.ConnectTimes()
	ok, _ := be.Dials(pool.DialClient)
	if h.Count != clients || ok != clients {
		t.Fatalf("%d connects timed, %d successful dials; want %d of each", h.Count, ok, clients)
	}
	if last := h.Cumulative[len(h.Cumulative)-1]; last != clients {
		t.Fatalf("%d of %d loopback connects within 5 s", last, clients)
	}
	if h.Sum <= 0 || h.Sum > clients*5*time.Second {
		t.Fatalf("connect time sum %v for %d loopback connects", h.Sum, clients)
	}
}
