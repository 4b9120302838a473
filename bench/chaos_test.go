package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary play the harness's child roles, so the
// chaos test can re-run itself inside its namespace (as l4lb's netns tests
// do) and as the chaos backends.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		if err := runRole(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChaosShort is the chaos scenario's CI run: 30 s of faults and
// checked streams (sizes to 4 MiB), then the resource checks. It fails on
// any violation, with the report in the log and the run directory kept.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: a 30 s run; skipped with -short")
	}
	if why := chaosPrereq(); why != "" {
		t.Skip("chaos: " + why)
	}
	w := &testLogWriter{t: t}
	rep, dir, err := runChaos(chaosOptions{Duration: 30 * time.Second, Log: w, FailFast: true})
	w.flush()
	if rep != nil {
		t.Log("\n" + renderChaos(rep))
	}
	if dir != "" {
		t.Logf("run directory kept: %s", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed {
		t.Fatalf("chaos: %d violation(s); first: %s", rep.ViolationCount, rep.Violations[0])
	}
	if rep.Totals.Exact == 0 || len(rep.Faults) < len(faultKinds) {
		t.Fatalf("chaos: too little happened: %d exact connections, %d faults", rep.Totals.Exact, len(rep.Faults))
	}
}

// testLogWriter turns the run's progress lines into t.Log lines.
type testLogWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *testLogWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.t.Log(string(w.buf))
		w.buf = nil
	}
}

func TestChaosProtocolRoundTrip(t *testing.T) {
	req := chaosRequest{ID: 7, Seed: 42, ReqLen: 1 << 20, RespLen: 16, Flags: chaosFlagHalfClose}
	got, err := parseChaosRequest(req.marshal())
	if err != nil || got != req || !got.halfClose() {
		t.Fatalf("request: %+v, %v", got, err)
	}
	h := chaosHello{Backend: 2, PID: 1234, PeerPort: 40000, LocalPort: 19102, Seq: 9}
	if gh, err := parseChaosHello(h.marshal()); err != nil || gh != h {
		t.Fatalf("hello: %+v, %v", gh, err)
	}
	tr := chaosTrailer{RxLen: 5, FirstBad: -1, Status: chaosTrailerShort}
	tr.Sum = sha256.Sum256([]byte("hello"))
	if gt, err := parseChaosTrailer(tr.marshal()); err != nil || gt != tr {
		t.Fatalf("trailer: %+v, %v", gt, err)
	}
	// One flipped bit anywhere in a header is caught.
	for _, b := range [][]byte{req.marshal(), h.marshal(), tr.marshal()} {
		for i := range b {
			c := bytes.Clone(b)
			c[i] ^= 0x10
			var err error
			switch len(b) {
			case chaosReqLen:
				_, err = parseChaosRequest(c)
			case chaosHelloLen:
				_, err = parseChaosHello(c)
			case chaosTrailerLen:
				_, err = parseChaosTrailer(c)
			}
			if err == nil {
				t.Fatalf("a flipped bit at byte %d of a %d-byte header went unnoticed", i, len(b))
			}
		}
	}
}

func TestStreamIsAFunctionOfOffset(t *testing.T) {
	whole := make([]byte, 1000)
	fillStream(99, 0, whole)
	// Any split, at any alignment, gives the same bytes.
	for _, cut := range []int{0, 1, 7, 8, 9, 63, 500, 999, 1000} {
		a, b := make([]byte, cut), make([]byte, 1000-cut)
		fillStream(99, 0, a)
		fillStream(99, uint64(cut), b)
		if !bytes.Equal(append(a, b...), whole) {
			t.Fatalf("split at %d differs", cut)
		}
	}
	other := make([]byte, 1000)
	fillStream(100, 0, other)
	if bytes.Equal(other, whole) {
		t.Fatal("two seeds, one stream")
	}
}

func TestStreamVerifierLocatesTheFirstWrongByte(t *testing.T) {
	data := make([]byte, 300<<10)
	fillStream(5, 0, data)
	v := newStreamVerifier(5)
	v.check(data[:1000])
	v.check(data[1000:])
	if v.firstBad != -1 || v.off != uint64(len(data)) {
		t.Fatalf("clean stream: firstBad %d, off %d", v.firstBad, v.off)
	}
	data[123457] ^= 1
	data[200000] ^= 1
	v = newStreamVerifier(5)
	for off := 0; off < len(data); off += 4099 {
		v.check(data[off:min(off+4099, len(data))])
	}
	if v.firstBad != 123457 {
		t.Fatalf("firstBad = %d, want 123457", v.firstBad)
	}
}

func TestParseProm(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 17
l4lb_backend_dials_total{backend="127.0.0.1:19102",kind="probe",pool="chaos",result="failure"} 3
l4lb_backend_dials_total{backend="127.0.0.1:19102",kind="probe",pool="chaos",result="success"} 4
l4lb_backend_dials_total{backend="127.0.0.1:19103",kind="probe",pool="chaos",result="success"} 1
l4lb_splice_pipes{state="idle"} 2
odd{v="a \"quoted\", value"} 1.5e+00
`
	ps, err := parseProm(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		got, want float64
	}{
		{ps.sum("go_goroutines"), 17},
		{ps.sum("l4lb_backend_dials_total", "kind", "probe"), 8},
		{ps.sum("l4lb_backend_dials_total", "backend", "127.0.0.1:19102", "result", "success"), 4},
		{ps.sum("l4lb_splice_pipes", "state", "idle"), 2},
		{ps.sum("odd", "v", `a "quoted", value`), 1.5},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
}

func TestFaultOverlapCoversTheWholeLife(t *testing.T) {
	f := &chaosFault{Start: 100, End: 200}
	for _, c := range []struct {
		start, end int64
		want       bool
	}{
		{10, 99, false},  // ended before the fault
		{10, 100, true},  // ended as it began
		{150, 160, true}, // inside
		{10, 500, true},  // spans it
		{200, 300, true}, // began as it ended
		{201, 300, false},
	} {
		if got := f.overlaps(c.start, c.end); got != c.want {
			t.Errorf("[%d,%d]: %v, want %v", c.start, c.end, got, c.want)
		}
	}
	open := &chaosFault{Start: 100}
	if !open.overlaps(1000, 2000) {
		t.Error("a fault never ended is in force from its start on")
	}
}

func TestPacketIndexFindsTheBackendsEnd(t *testing.T) {
	const l4lbPort, bPort = 40000, 19102
	x := newPacketIndex([]ctlPacket{
		{T: 10, Sport: l4lbPort, Dport: bPort, Flags: tcpSYN},              // an earlier stream on the same ports
		{T: 20, Sport: bPort, Dport: l4lbPort, Flags: tcpFIN | tcpACK},     // its end
		{T: 30, Sport: l4lbPort, Dport: bPort, Flags: tcpSYN},              // this stream
		{T: 31, Sport: bPort, Dport: l4lbPort, Flags: tcpSYN | tcpACK},     // SYN-ACK: no end
		{T: 50, Sport: bPort, Dport: l4lbPort, Flags: tcpRST | tcpACK},     // its end
		{T: 60, Sport: bPort, Dport: l4lbPort + 1, Flags: tcpFIN | tcpACK}, // another stream
	})
	start := x.streamStart(l4lbPort, bPort, 40)
	if start != 30 {
		t.Fatalf("stream start %d, want 30", start)
	}
	if k, at := x.firstEnd(bPort, l4lbPort, start, 100); k != "rst" || at != 50 {
		t.Fatalf("end %s at %d, want rst at 50", k, at)
	}
	if k, _ := x.firstEnd(bPort, l4lbPort, start, 45); k != "none" {
		t.Fatalf("end before the client's end: %s, want none", k)
	}
}

func TestChaosFlags(t *testing.T) {
	o, err := parseFlags([]string{"-scenario", "chaos", "-duration", "45s", "-seed", "3"})
	if err != nil || !o.chaos || o.chaosDuration != 45*time.Second || o.seed != 3 {
		t.Fatalf("%+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-scenario", "chaos,bulk"}, {"-scenario", "chaos", "-duration", "1s"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%v) accepted", bad)
		}
	}
	if o, _ := parseFlags(nil); o.chaos {
		t.Error("chaos is not part of the default scenarios")
	}
}

// startTestBackend serves the chaos protocol in-process on a free port.
func startTestBackend(t *testing.T, id int) (*chaosBackend, string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := ln.(*net.TCPListener)
	b := &chaosBackend{id: id, port: uint16(l.Addr().(*net.TCPAddr).Port)}
	go func() {
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			go b.handle(c)
		}
	}()
	t.Cleanup(func() { l.Close() })
	return b, l.Addr().String()
}

// Without l4lb in between, every stream is exact, and the client's own
// deliberate resets are told apart.
func TestChaosClientAgainstBackendDirect(t *testing.T) {
	_, addr := startTestBackend(t, 1)
	cl := &chaosClients{cfg: chaosClientConfig{Addr: addr, Workers: 4, MinSize: 16, MaxSize: 1 << 20,
		HalfClose: 0.5, ResetShare: 0.2, Stall: 10 * time.Second, MaxConns: 200}, seed: 1}
	cl.run(nil)
	n := map[string]int{}
	for _, c := range cl.results() {
		n[c.Outcome]++
		if c.Outcome != outExact && c.Outcome != outClientReset {
			t.Errorf("connection %d (%d/%d bytes, half-close %v, reset %q): %s: %s", c.ID, c.ReqLen, c.RespLen, c.HalfClose, c.PlanReset, c.Outcome, c.Detail)
		}
	}
	if n[outExact] == 0 || n[outClientReset] == 0 {
		t.Errorf("outcomes %v", n)
	}
}

func TestGoroutineGrowth(t *testing.T) {
	before := `goroutine profile: total 3
2 @ 0x1 0x2
#	0x1	runtime.gopark+0x1	/go/src/runtime/proc.go:1
#	0x2	main.accept+0x2	/x/accept.go:10

1 @ 0x3
#	0x3	main.health+0x3	/x/health.go:5
`
	after := `goroutine profile: total 5
2 @ 0x1 0x2
#	0x1	runtime.gopark+0x1	/go/src/runtime/proc.go:1
#	0x2	main.accept+0x2	/x/accept.go:10

3 @ 0x4
#	0x4	main.leak+0x4	/x/leak.go:7
`
	got := goroutineGrowth(before, after)
	if len(got) != 1 || got[0] != "+3 main.leak+0x4" {
		t.Fatalf("growth %q", got)
	}
}

func TestMode(t *testing.T) {
	for _, c := range []struct {
		v    []int
		want int
	}{{[]int{17, 17, 16, 17, 18}, 17}, {[]int{5}, 5}, {[]int{3, 2, 2, 3}, 2}} {
		if got := mode(c.v); got != c.want {
			t.Errorf("mode(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}

// The rules, on a hand-made timeline, packets and connections.
func TestChaosVerdicts(t *testing.T) {
	const l4lbToB2, l4lbToB1 = 40002, 40001
	b2 := uint16(chaosPortBase + 2)
	b1 := uint16(chaosPortBase + 1)
	kill := chaosFault{N: 1, Backend: 2, Kind: faultKill, Start: 1000, End: 2000}
	acceptClose := chaosFault{N: 2, Backend: 3, Kind: faultAcceptClose, Start: 5000, End: 6000}
	pk := func(t int64, s, d uint16, f uint8) ctlPacket { return ctlPacket{T: t, Sport: s, Dport: d, Flags: f} }
	for _, c := range []struct {
		name   string
		conn   chaosConn
		pkts   []ctlPacket
		bad    bool
		output string // the outcome after the analysis
	}{
		{name: "exact", conn: chaosConn{Backend: 1, Outcome: outExact}, output: outExact},
		{name: "corrupted", conn: chaosConn{Backend: 1, Outcome: outCorrupted}, bad: true, output: outCorrupted},
		{name: "truncated behind the killed backend's FIN",
			conn:   chaosConn{Backend: 2, ClientPort: 50000, PeerPort: l4lbToB2, Start: 900, End: 1500, HelloAt: 950, Outcome: outTruncated, Detail: "FIN after 3 of 9"},
			pkts:   []ctlPacket{pk(910, l4lbToB2, b2, tcpSYN), pk(1100, b2, l4lbToB2, tcpFIN|tcpACK), pk(1101, chaosListenPort, 50000, tcpFIN|tcpACK)},
			output: outTruncated},
		{name: "truncated behind a FIN its backend did not send",
			conn: chaosConn{Backend: 2, ClientPort: 50000, PeerPort: l4lbToB2, Start: 900, End: 1500, HelloAt: 950, Outcome: outTruncated, Detail: "FIN after 3 of 9"},
			pkts: []ctlPacket{pk(910, l4lbToB2, b2, tcpSYN), pk(1100, b2, l4lbToB2, tcpRST), pk(1101, chaosListenPort, 50000, tcpFIN|tcpACK)},
			bad:  true, output: outTruncated},
		{name: "EOF read after a reset is a reset",
			conn:   chaosConn{Backend: 2, ClientPort: 50000, PeerPort: l4lbToB2, Start: 900, End: 1500, HelloAt: 950, Outcome: outTruncated, Detail: "FIN after 3 of 9"},
			pkts:   []ctlPacket{pk(910, l4lbToB2, b2, tcpSYN), pk(1100, b2, l4lbToB2, tcpRST), pk(1101, chaosListenPort, 50000, tcpRST)},
			output: outReset},
		{name: "truncated behind its backend's FIN while healthy",
			conn: chaosConn{Backend: 1, ClientPort: 50001, PeerPort: l4lbToB1, Start: 3000, End: 3500, HelloAt: 3050, Outcome: outTruncated, Detail: "FIN after 3 of 9"},
			pkts: []ctlPacket{pk(3010, l4lbToB1, b1, tcpSYN), pk(3100, b1, l4lbToB1, tcpFIN|tcpACK), pk(3101, chaosListenPort, 50001, tcpFIN|tcpACK)},
			bad:  true, output: outTruncated},
		{name: "request truncated behind a FIN", conn: chaosConn{Backend: 2, Start: 900, End: 1500, Outcome: outTruncated, Detail: "backend got a FIN after 1 of 5 request bytes"},
			bad: true, output: outTruncated},
		{name: "reset on a faulted backend", conn: chaosConn{Backend: 2, Start: 1900, End: 2500, Outcome: outReset}, output: outReset},
		{name: "reset on a healthy backend", conn: chaosConn{Backend: 2, Start: 2001, End: 2500, Outcome: outReset}, bad: true, output: outReset},
		{name: "stalled on the never-faulted backend", conn: chaosConn{Backend: 1, Start: 1000, End: 2000, Outcome: outStalled}, bad: true, output: outStalled},
		{name: "before the first byte, a backend faulted", conn: chaosConn{Start: 5500, End: 5600, Outcome: outNoHello}, output: outNoHello},
		{name: "before the first byte, nothing faulted", conn: chaosConn{Start: 3000, End: 3100, Outcome: outNoHello}, bad: true, output: outNoHello},
		{name: "not accepted", conn: chaosConn{Start: 5500, End: 5600, Outcome: outDialFailed}, bad: true, output: outDialFailed},
		{name: "client reset", conn: chaosConn{Start: 3000, End: 3100, Outcome: outClientReset}, output: outClientReset},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &chaosRun{spec: chaosSpec{Dir: t.TempDir()}, rep: &chaosReport{}, log: io.Discard}
			for i := 1; i <= chaosBackends; i++ {
				r.backends = append(r.backends, &chaosBackendProc{id: i})
			}
			r.tl.faults = []*chaosFault{&kill, &acceptClose}
			conn := c.conn
			r.analyse([]*chaosConn{&conn}, c.pkts)
			if got := r.rep.ViolationCount > 0; got != c.bad {
				t.Errorf("violation %v, want %v: %v (verdict %q)", got, c.bad, r.rep.Violations, conn.Verdict)
			}
			if conn.Outcome != c.output {
				t.Errorf("outcome %s, want %s", conn.Outcome, c.output)
			}
		})
	}
}
