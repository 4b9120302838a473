package main

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault kinds, applied to every backend but the first.
const (
	faultKill        = "kill"         // SIGKILL, restarted at the end of the fault
	faultStop        = "sigstop"      // SIGSTOP, SIGCONT at the end
	faultDropSYN     = "drop-syn"     // nft: SYNs to its port dropped
	faultRejectSYN   = "reject-syn"   // nft: SYNs to its port answered with a reset
	faultRejectAll   = "reject-all"   // nft: every packet to its port answered with a reset
	faultResetMid    = "reset-mid"    // the backend resets about half of its streams after some bytes
	faultAcceptClose = "accept-close" // the backend closes every connection the moment it accepts it
)

var faultKinds = []string{faultKill, faultStop, faultDropSYN, faultRejectSYN, faultRejectAll, faultResetMid, faultAcceptClose}

// chaosFault is one fault on the timeline. Start is taken before the fault
// is applied and End after it was fully undone (the restarted backend
// listening, SIGCONT sent, the rule gone, the mode acknowledged), so the
// interval covers every moment the fault could act.
type chaosFault struct {
	N       int    `json:"n"`
	Backend int    `json:"backend"`
	Kind    string `json:"kind"`
	Start   int64  `json:"start_ns"`
	End     int64  `json:"end_ns"`
	Note    string `json:"note,omitempty"`
}

func (f *chaosFault) label() string { return fmt.Sprintf("%s#%d(b%d)", f.Kind, f.N, f.Backend) }

// overlaps reports whether the fault was in force at any moment of
// [start, end].
func (f *chaosFault) overlaps(start, end int64) bool {
	fe := f.End
	if fe == 0 {
		fe = 1<<63 - 1 // still in force
	}
	return f.Start <= end && fe >= start
}

type faultTimeline struct {
	mu     sync.Mutex
	faults []*chaosFault
}

func (t *faultTimeline) begin(backend int, kind string) *chaosFault {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := &chaosFault{N: len(t.faults) + 1, Backend: backend, Kind: kind, Start: time.Now().UnixNano()}
	t.faults = append(t.faults, f)
	return f
}

func (t *faultTimeline) end(f *chaosFault, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f.End = time.Now().UnixNano()
	if note != "" {
		if f.Note != "" {
			f.Note += "; "
		}
		f.Note += note
	}
}

func (t *faultTimeline) snapshot() []chaosFault {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]chaosFault, len(t.faults))
	for i, f := range t.faults {
		out[i] = *f
	}
	return out
}

// chaosNft drives the nftables table of the run's own namespace: one chain
// per faulted backend, jumped to from the input hook.
const chaosNftTable = "l4lbchaos"

func nftScript(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %v: %s (script: %q)", err, strings.TrimSpace(string(out)), script)
	}
	return nil
}

func nftSetUp(backends []int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "add table inet %s\n", chaosNftTable)
	fmt.Fprintf(&b, "add chain inet %s input { type filter hook input priority 0 ; policy accept ; }\n", chaosNftTable)
	for _, id := range backends {
		fmt.Fprintf(&b, "add chain inet %s b%d\n", chaosNftTable, id)
		fmt.Fprintf(&b, "add rule inet %s input jump b%d\n", chaosNftTable, id)
	}
	return nftScript(b.String())
}

func nftRule(backend, port int, kind string) string {
	var match string
	switch kind {
	case faultDropSYN:
		match = fmt.Sprintf("tcp dport %d tcp flags & (syn|ack) == syn drop", port)
	case faultRejectSYN:
		match = fmt.Sprintf("tcp dport %d tcp flags & (syn|ack) == syn reject with tcp reset", port)
	case faultRejectAll:
		match = fmt.Sprintf("tcp dport %d reject with tcp reset", port)
	}
	return fmt.Sprintf("add rule inet %s b%d %s\n", chaosNftTable, backend, match)
}

func nftClear(backend int) error {
	return nftScript(fmt.Sprintf("flush chain inet %s b%d\n", chaosNftTable, backend))
}

// faultSchedule applies faults to one backend, one at a time, until stop:
// a gap, then the next kind from a shuffled deck of all kinds (so every
// kind comes round equally often), held for a random time, then undone.
type faultSchedule struct {
	be               *chaosBackendProc
	tl               *faultTimeline
	rng              *rand.Rand
	holdMin, holdMax time.Duration
	gapMin, gapMax   time.Duration
	logf             func(string, ...any)
	deck             []string
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func (s *faultSchedule) next() string {
	if len(s.deck) == 0 {
		s.deck = append([]string(nil), faultKinds...)
		s.rng.Shuffle(len(s.deck), func(i, j int) { s.deck[i], s.deck[j] = s.deck[j], s.deck[i] })
	}
	k := s.deck[0]
	s.deck = s.deck[1:]
	return k
}

// run returns the first error that leaves the backend in an unknown state
// (a restart that fails, nft refusing a rule); faults already applied are
// undone before it returns.
func (s *faultSchedule) run(stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		case <-time.After(between(s.rng, s.gapMin, s.gapMax)):
		}
		if err := s.apply(s.next(), between(s.rng, s.holdMin, s.holdMax), stop); err != nil {
			return err
		}
	}
}

func (s *faultSchedule) hold(d time.Duration, stop <-chan struct{}) {
	select {
	case <-stop:
	case <-time.After(d):
	}
}

func (s *faultSchedule) apply(kind string, d time.Duration, stop <-chan struct{}) error {
	be := s.be
	f := s.tl.begin(be.id, kind)
	switch kind {
	case faultKill:
		old := be.current()
		old.kill()
		s.hold(d, stop)
		// The port may be briefly busy; a restart that keeps failing is fatal.
		var err error
		for try := 0; try < 5; try++ {
			if err = be.start(); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			s.tl.end(f, "restart failed")
			return fmt.Errorf("backend %d: restart after kill: %w", be.id, err)
		}
		s.tl.end(f, fmt.Sprintf("pid %d killed, %d started", old.pid, be.current().pid))
	case faultStop:
		p := be.current()
		_ = syscall.Kill(-p.pid, syscall.SIGSTOP)
		s.hold(d, stop)
		_ = syscall.Kill(-p.pid, syscall.SIGCONT)
		s.tl.end(f, "")
	case faultDropSYN, faultRejectSYN, faultRejectAll:
		if err := nftScript(nftRule(be.id, be.port, kind)); err != nil {
			s.tl.end(f, "nft failed")
			return err
		}
		s.hold(d, stop)
		if err := nftClear(be.id); err != nil {
			return err
		}
		s.tl.end(f, "")
	case faultResetMid, faultAcceptClose:
		if err := be.current().setMode(kind); err != nil {
			s.tl.end(f, "mode failed")
			return fmt.Errorf("backend %d: %w", be.id, err)
		}
		s.hold(d, stop)
		if err := be.current().setMode("normal"); err != nil {
			return fmt.Errorf("backend %d: %w", be.id, err)
		}
		s.tl.end(f, "")
	}
	return nil
}
