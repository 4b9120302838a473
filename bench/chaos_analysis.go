package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// chaosReport is the run's result: the JSON the inner run writes and the
// text table renders.
type chaosReport struct {
	Started         string                      `json:"started"`
	Spec            chaosSpec                   `json:"spec"`
	L4lbConfig      string                      `json:"l4lb_config"`
	L4lbPID         int                         `json:"l4lb_pid"`
	RunSeconds      float64                     `json:"run_seconds"`
	DrainSeconds    float64                     `json:"drain_seconds"`
	ReadmitSeconds  float64                     `json:"readmit_seconds"`
	Warmup          struct{ Conns, Failed int } `json:"warmup"`
	Totals          chaosTotals                 `json:"totals"`
	PerBackend      []backendRow                `json:"per_backend"`
	ByFault         []faultRow                  `json:"by_fault"`
	Kills           killStats                   `json:"kills"`
	Faults          []chaosFault                `json:"faults"`
	Problems        []*chaosConn                `json:"problems"` // connections that did not end byte-exact or by the client's own reset
	ProblemsLeftOff int                         `json:"problems_left_off,omitempty"`
	BackendEvents   map[string]int              `json:"backend_events"`
	BackendDefects  []chaosBackendEvent         `json:"backend_defects,omitempty"`
	Breaker         []breakerRow                `json:"breaker"`
	ClientResults   map[string]float64          `json:"l4lb_client_results"`
	Metrics         map[string]float64          `json:"l4lb_metrics,omitempty"`
	Resources       chaosResources              `json:"resources"`
	Capture         captureStats                `json:"capture"`
	L4lbExit        string                      `json:"l4lb_exit"`
	Violations      []string                    `json:"violations"` // the first maxViolationsListed
	ViolationCount  int                         `json:"violation_count"`
	Passed          bool                        `json:"passed"`
}

type chaosTotals struct {
	Attempted   int `json:"attempted"`
	Exact       int `json:"byte_exact"`
	Corrupted   int `json:"corrupted"`
	Truncated   int `json:"truncated"`
	Failed      int `json:"failed"`
	ClientReset int `json:"client_reset"`
	// truncated, by who sent the FIN
	TruncBackendFIN int `json:"truncated_behind_backend_fin"`
	TruncFalseFIN   int `json:"truncated_behind_false_fin"`
	TruncRequest    int `json:"request_truncated_behind_fin"`
	// failed, by how
	Reset      int `json:"failed_reset"`
	Stalled    int `json:"failed_stalled"`
	NoHello    int `json:"failed_before_first_byte"`
	DialFailed int `json:"failed_dial"`
	// exact connections whose backend was faulted during their life
	ExactThroughFault int    `json:"exact_through_fault"`
	HalfClosed        int    `json:"half_closed"`
	BytesSent         uint64 `json:"bytes_sent"`
	BytesReceived     uint64 `json:"bytes_received"`
	Violating         int    `json:"violating_connections"`
}

type backendRow struct {
	Backend     int    `json:"backend"`
	Faulted     bool   `json:"faulted"`
	Conns       int    `json:"conns"`
	Exact       int    `json:"exact"`
	ClientReset int    `json:"client_reset"`
	Truncated   int    `json:"truncated"`
	Failed      int    `json:"failed"`
	Corrupted   int    `json:"corrupted"`
	Faults      int    `json:"faults"`
	PIDs        []int  `json:"pids"`
	Bytes       uint64 `json:"bytes"`
}

// faultRow: connections by the fault they coincided with (the last fault
// on their backend that overlapped their life; for a connection that never
// learnt its backend, the last on any backend).
type faultRow struct {
	Kind        string `json:"kind"`
	Applied     int    `json:"applied"`
	Conns       int    `json:"conns"`
	Exact       int    `json:"exact"`
	ClientReset int    `json:"client_reset"`
	Truncated   int    `json:"truncated"`
	Reset       int    `json:"reset"`
	Stalled     int    `json:"stalled"`
	NoHello     int    `json:"no_hello"`
	Corrupted   int    `json:"corrupted"`
	Violating   int    `json:"violating"`
}

// killStats: how the streams a kill cut ended, by what the dead backend's
// kernel sent (FIN when the socket's receive queue was empty, else RST).
type killStats struct {
	Kills     int `json:"kills"`
	Cut       int `json:"streams_cut"`
	BehindFIN int `json:"truncated_behind_its_fin"`
	BehindRST int `json:"reset_behind_its_rst"`
	// The dead backend sent a FIN, but the client was still sending: l4lb's
	// write met the dead socket's reset, and l4lb reset the client.
	ResetAfterFIN int `json:"reset_after_its_fin"`
	NoHello       int `json:"before_first_byte"`
	OtherOutcome  int `json:"other"`
}

type breakerRow struct {
	Backend       int     `json:"backend"`
	Trips         float64 `json:"trips"`
	ProbesOK      float64 `json:"probes_ok"`
	ProbesFailed  float64 `json:"probes_failed"`
	ProbeFailures float64 `json:"probe_failures_total"`
	Stale         float64 `json:"stale_results"`
	ClientOK      float64 `json:"client_dials_ok"`
	ClientFailed  float64 `json:"client_dials_failed"`
	HealthOK      float64 `json:"health_ok"`
	HealthFailed  float64 `json:"health_failed"`
	ForceOK       float64 `json:"force_ok"`
	ForceFailed   float64 `json:"force_failed"`
	ToBackend     float64 `json:"bytes_to_backend"`
	ToClient      float64 `json:"bytes_to_client"`
}

type chaosResources struct {
	Before        resSample   `json:"before"`
	Peak          resSample   `json:"peak"`
	After         resSample   `json:"after"`
	SettleSeconds float64     `json:"settle_seconds"`
	Samples       []resSample `json:"-"`
}

type captureStats struct {
	Packets int    `json:"packets"`
	Seen    uint32 `json:"kernel_seen"`
	Drops   uint32 `json:"kernel_drops"`
}

func breakerStats(ps promSet) []breakerRow {
	var out []breakerRow
	for i := 1; i <= chaosBackends; i++ {
		a := chaosBackendAddr(i)
		d := func(kind, result string) float64 {
			return ps.sum("l4lb_backend_dials_total", "backend", a, "kind", kind, "result", result)
		}
		out = append(out, breakerRow{
			Backend: i, Trips: ps.sum("l4lb_breaker_trips_total", "backend", a),
			ProbesOK: d("probe", "success"), ProbesFailed: d("probe", "failure"),
			ProbeFailures: ps.sum("l4lb_breaker_probe_failures_total", "backend", a),
			Stale:         ps.sum("l4lb_breaker_stale_results_total", "backend", a),
			ClientOK:      d("client", "success"), ClientFailed: d("client", "failure"),
			HealthOK: d("health", "success"), HealthFailed: d("health", "failure"),
			ForceOK: d("force", "success"), ForceFailed: d("force", "failure"),
			ToBackend: ps.sum("l4lb_bytes_total", "backend", a, "direction", "to_backend"),
			ToClient:  ps.sum("l4lb_bytes_total", "backend", a, "direction", "to_client"),
		})
	}
	return out
}

func clientResults(ps promSet) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ps {
		if s.name == "l4lb_client_connections_total" {
			out[s.labels["result"]] += s.value
		}
	}
	return out
}

// forReport flattens l4lb's own metrics ("name{k=v,...}").
func (ps promSet) forReport() map[string]float64 {
	out := map[string]float64{}
	for _, s := range ps {
		if !strings.HasPrefix(s.name, "l4lb_") {
			continue
		}
		var keys []string
		for k := range s.labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lb []string
		for _, k := range keys {
			lb = append(lb, k+"="+s.labels[k])
		}
		out[s.name+"{"+strings.Join(lb, ",")+"}"] = s.value
	}
	return out
}

// l4lbLogLine is one of l4lb's debug lines that name a client.
type l4lbLogLine struct {
	T       int64
	Msg     string
	Backend int // 0: none named
	Text    string
}

// readL4lbLog indexes l4lb's JSON log by client port.
func readL4lbLog(path string) map[uint16][]l4lbLogLine {
	out := map[uint16][]l4lbLogLine{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		client, _ := m["client"].(string)
		if client == "" {
			continue
		}
		_, port, err := splitPort(client)
		if err != nil {
			continue
		}
		ts, _ := m["time"].(string)
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		l := l4lbLogLine{T: t.UnixNano(), Text: sc.Text()}
		l.Msg, _ = m["msg"].(string)
		if be, _ := m["backend"].(string); be != "" {
			if _, p, err := splitPort(be); err == nil {
				l.Backend = p - chaosPortBase
			}
		}
		out[uint16(port)] = append(out[uint16(port)], l)
	}
	return out
}

func splitPort(hostport string) (string, int, error) {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("no port in %q", hostport)
	}
	p, err := strconv.Atoi(hostport[i+1:])
	return hostport[:i], p, err
}

func readBackendEvents(dir string) []chaosBackendEvent {
	var out []chaosBackendEvent
	for i := 1; i <= chaosBackends; i++ {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("backend-%d.events", i)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e chaosBackendEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil { // a kill may cut the last line
				out = append(out, e)
			}
		}
		f.Close()
	}
	return out
}

func overlapping(fs []*chaosFault, start, end int64) []*chaosFault {
	var out []*chaosFault
	for _, f := range fs {
		if f.overlaps(start, end) {
			out = append(out, f)
		}
	}
	return out
}

func labels(fs []*chaosFault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.label())
	}
	return out
}

// lastOf is the fault that started last.
func lastOf(fs []*chaosFault) *chaosFault {
	var l *chaosFault
	for _, f := range fs {
		if l == nil || f.Start > l.Start {
			l = f
		}
	}
	return l
}

// breaking are the faults that end streams (the others delay them).
var breaking = map[string]bool{faultKill: true, faultRejectAll: true, faultResetMid: true, faultAcceptClose: true}

// likeliest is, for a connection whose backend is not known, the last of
// the faults that could have ended it, else the last of all.
func likeliest(fs []*chaosFault) *chaosFault {
	var b []*chaosFault
	for _, f := range fs {
		if breaking[f.Kind] {
			b = append(b, f)
		}
	}
	if len(b) > 0 {
		return lastOf(b)
	}
	return lastOf(fs)
}

const maxProblemsListed = 1000

// analyse classifies every connection against the fault timeline, the
// packets seen on lo, l4lb's log and the backends' events, and records
// every violation.
func (r *chaosRun) analyse(conns []*chaosConn, pkts []ctlPacket) {
	rep := r.rep
	faults := r.tl.snapshot()
	rep.Faults = faults
	byBackend := map[int][]*chaosFault{}
	var all []*chaosFault
	for i := range faults {
		f := &faults[i]
		byBackend[f.Backend] = append(byBackend[f.Backend], f)
		all = append(all, f)
	}
	pidx := newPacketIndex(pkts)
	logIdx := readL4lbLog(filepath.Join(r.spec.Dir, "l4lb.log"))
	sort.Slice(conns, func(i, j int) bool { return conns[i].ID < conns[j].ID })
	byID := map[uint64]*chaosConn{}

	rows := map[string]*faultRow{}
	for _, k := range append(append([]string(nil), faultKinds...), "none", "unknown") {
		rows[k] = &faultRow{Kind: k}
	}
	for _, f := range faults {
		rows[f.Kind].Applied++
	}
	perB := map[int]*backendRow{}
	for i := 1; i <= chaosBackends; i++ {
		perB[i] = &backendRow{Backend: i, Faulted: i > 1, Faults: len(byBackend[i]), PIDs: r.backends[i-1].pids}
	}
	rep.Kills.Kills = rows[faultKill].Applied
	t := &rep.Totals
	var problems []*chaosConn
	for _, c := range conns {
		byID[c.ID] = c
		t.Attempted++
		t.BytesSent += c.Sent
		t.BytesReceived += c.Received
		if c.HalfClose {
			t.HalfClosed++
		}
		// Which backend, and which faults it was under during this life.
		backend := c.Backend
		if backend == 0 {
			// l4lb logs a relay's reset, or a client it could not serve, as
			// it ends: within moments of the client's end. Client ports are
			// reused within seconds at these rates, so the window is tight.
			best := int64(-1)
			for _, l := range logIdx[c.ClientPort] {
				if l.T < c.Start || l.T > c.End+int64(time.Second) {
					continue
				}
				if d := abs64(l.T - c.End); best < 0 || d < best {
					best = d
					c.L4lbLog = l.Text
					backend = l.Backend
				}
			}
		}
		var on []*chaosFault
		if backend > 0 {
			on = overlapping(byBackend[backend], c.Start, c.End)
			c.Faults = labels(on)
		} else {
			on = overlapping(all, c.Start, c.End)
			c.AnyFaults = labels(on)
		}
		if c.failed() && c.ClientPort != 0 {
			// What l4lb sent the client. A socket that gets a reset fails
			// only the first call made on it: a client whose writer made
			// that call reads EOF next, though a reset, not a FIN, came.
			c.L4lbEnd, _ = pidx.firstEnd(chaosListenPort, c.ClientPort, c.Start, c.End)
			if c.Outcome == outTruncated && c.L4lbEnd == "rst" {
				c.Outcome = outReset
				c.Detail += " (read as EOF: l4lb sent a reset, which the client's own write had already reported)"
			}
		}
		if c.Backend > 0 && c.PeerPort != 0 && c.failed() {
			bport := uint16(chaosPortBase + c.Backend)
			from := max(c.Start, pidx.streamStart(c.PeerPort, bport, c.HelloAt))
			c.BackendEnd, _ = pidx.firstEnd(bport, c.PeerPort, from, c.End)
		}
		row := rows["none"]
		main := lastOf(on)
		if backend == 0 {
			main = likeliest(on)
		}
		if main != nil {
			row = rows[main.Kind]
		}
		if backend == 0 && !c.failed() {
			// Reset by the client before its backend's first byte: which
			// backend, and so which fault, is not known.
			row = rows["unknown"]
		}
		row.Conns++
		pb := perB[c.Backend]
		if pb != nil {
			pb.Conns++
			pb.Bytes += c.Sent + c.Received
		}
		bad := ""
		switch c.Outcome {
		case outExact:
			t.Exact++
			row.Exact++
			if len(on) > 0 {
				t.ExactThroughFault++
			}
			if pb != nil {
				pb.Exact++
			}
		case outClientReset:
			t.ClientReset++
			row.ClientReset++
			if pb != nil {
				pb.ClientReset++
			}
		case outCorrupted:
			t.Corrupted++
			row.Corrupted++
			if pb != nil {
				pb.Corrupted++
			}
			bad = "corrupted: " + c.Detail
		case outTruncated:
			t.Truncated++
			row.Truncated++
			if pb != nil {
				pb.Truncated++
			}
			switch {
			case strings.HasPrefix(c.Detail, "backend got a FIN"):
				t.TruncRequest++
				bad = "request truncated behind a FIN the client never sent: " + c.Detail
			case c.BackendEnd == "fin" && len(on) > 0:
				t.TruncBackendFIN++
				c.Verdict = "the backend's own FIN (" + strings.Join(c.Faults, " ") + ")"
			case c.BackendEnd == "fin":
				t.TruncBackendFIN++
				bad = "truncated behind its backend's FIN while that backend was not faulted"
			default:
				t.TruncFalseFIN++
				bad = fmt.Sprintf("truncated behind a FIN its backend did not send (l4lb sent the client: %s; the backend sent l4lb: %s, on l4lb port %d)",
					c.L4lbEnd, c.BackendEnd, c.PeerPort)
			}
		default:
			t.Failed++
			switch c.Outcome {
			case outReset:
				t.Reset++
				row.Reset++
			case outStalled:
				t.Stalled++
				row.Stalled++
			case outNoHello:
				t.NoHello++
				row.NoHello++
			case outDialFailed:
				t.DialFailed++
			}
			if pb != nil {
				pb.Failed++
			}
			switch {
			case c.Outcome == outDialFailed:
				bad = "l4lb's listener did not accept: " + c.Detail
			case len(on) == 0 && c.Backend > 0:
				bad = fmt.Sprintf("failed on backend %d while it was not faulted", c.Backend)
			case len(on) == 0 && backend > 0:
				bad = fmt.Sprintf("failed before its backend's first byte; l4lb's log names backend %d, which was not faulted", backend)
			case len(on) == 0:
				bad = "failed before any backend's first byte while no backend was faulted"
			default:
				c.Verdict = "coincided with " + strings.Join(append(c.Faults, c.AnyFaults...), " ")
				if c.Backend == 0 && backend == 0 {
					c.Verdict += " (backend unknown)"
				}
			}
		}
		// Kills: how the streams they cut ended.
		if main != nil && main.Kind == faultKill && c.failed() {
			rep.Kills.Cut++
			switch {
			case c.Outcome == outTruncated && c.BackendEnd == "fin":
				rep.Kills.BehindFIN++
			case c.Outcome == outReset && c.BackendEnd == "rst":
				rep.Kills.BehindRST++
			case c.Outcome == outReset && c.BackendEnd == "fin":
				rep.Kills.ResetAfterFIN++
			case c.Outcome == outNoHello:
				rep.Kills.NoHello++
			default:
				rep.Kills.OtherOutcome++
			}
		}
		if bad != "" {
			c.Verdict = "VIOLATION: " + bad
			row.Violating++
			t.Violating++
			r.violation("connection %d (client port %d, backend %d, l4lb port %d, %s): %s; faults: %s",
				c.ID, c.ClientPort, c.Backend, c.PeerPort, c.Detail, bad, strings.Join(append(c.Faults, c.AnyFaults...), " "))
		}
		if c.failed() {
			problems = append(problems, c)
		}
	}
	// Violating connections first, then the others, up to the cap.
	sort.SliceStable(problems, func(i, j int) bool {
		return strings.HasPrefix(problems[i].Verdict, "VIOLATION") && !strings.HasPrefix(problems[j].Verdict, "VIOLATION")
	})
	if len(problems) > maxProblemsListed {
		rep.ProblemsLeftOff = len(problems) - maxProblemsListed
		problems = problems[:maxProblemsListed]
	}
	rep.Problems = problems
	for _, k := range append(append([]string(nil), faultKinds...), "none", "unknown") {
		rep.ByFault = append(rep.ByFault, *rows[k])
	}
	for i := 1; i <= chaosBackends; i++ {
		rep.PerBackend = append(rep.PerBackend, *perB[i])
	}

	// The backends' side: a FIN before the whole request, or a wrong byte.
	rep.BackendEvents = map[string]int{}
	for _, e := range readBackendEvents(r.spec.Dir) {
		if e.Kind == evShortRequest {
			// As on the client side: a reset reads as EOF once the
			// backend's writer has reported it. Only a FIN counts.
			bport := uint16(chaosPortBase + e.Backend)
			from := pidx.streamStart(e.Peer, bport, e.T)
			if end, _ := pidx.firstEnd(e.Peer, bport, from, e.T); end == "rst" {
				e.Kind = evShortRequest + "-after-reset"
			}
		}
		rep.BackendEvents[e.Kind]++
		if e.Kind != evShortRequest && e.Kind != evCorruptRequest {
			continue
		}
		rep.BackendDefects = append(rep.BackendDefects, e)
		client := "no client connection with that id"
		if c := byID[e.ConnID]; c != nil {
			client = fmt.Sprintf("client outcome %s, %s", c.Outcome, c.Detail)
		}
		r.violation("backend %d (pid %d, l4lb port %d, connection %d): %s: %s [%s]", e.Backend, e.PID, e.Peer, e.ConnID, e.Kind, e.Detail, client)
	}
	if rep.Capture.Drops > 0 {
		r.violation("the packet capture lost %d packets: FIN attribution may be wrong", rep.Capture.Drops)
	}

	res := &rep.Resources
	res.Peak = res.Before
	for _, s := range append(res.Samples, res.After) {
		res.Peak = maxSample(res.Peak, s)
	}
}

func maxSample(a, s resSample) resSample {
	a.Fds = max(a.Fds, s.Fds)
	a.PipeFds = max(a.PipeFds, s.PipeFds)
	a.SocketFds = max(a.SocketFds, s.SocketFds)
	a.RSSKB = max(a.RSSKB, s.RSSKB)
	a.Threads = max(a.Threads, s.Threads)
	a.Goroutines = max(a.Goroutines, s.Goroutines)
	a.PipesBusy = max(a.PipesBusy, s.PipesBusy)
	a.PipesIdle = max(a.PipesIdle, s.PipesIdle)
	a.ConnsActive = max(a.ConnsActive, s.ConnsActive)
	a.ClientsOpen = max(a.ClientsOpen, s.ClientsOpen)
	return a
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
