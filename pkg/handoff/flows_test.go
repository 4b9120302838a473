package handoff

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
)

// The flows protocol between two processes, played here by two ends of a
// real SEQPACKET pair in one process: each side's FlowHolder is a fake
// whose connections are pipes (any descriptor travels alike).

// fakeConns is a holder's connections: each a pipe's read end, named by
// its listener field.
type fakeConns struct {
	mu      sync.Mutex
	toHand  []flow.Relay // the old side's, with real fds in ClientFD
	pending int          // set-up connections the old side reports once
	refuse  map[string]bool
	adopted []flow.Relay // with this side's fds
	stayed  []bool
	ran     int
	done    int     // FlowsDone calls
	holding int64   // the old side's connections still being set up (Holding)
	heard   []int64 // the new side: each count HeldElsewhere was told
}

// Holding is the old side's count: its connections still being set up
// (holding), those it still has to hand and those it took back.
func (h *fakeConns) Holding() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding + int64(len(h.toHand)+len(h.adopted))
}

func (h *fakeConns) HeldElsewhere(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heard = append(h.heard, n)
}

// lastHeard is the count the new side was told last (-1: none yet).
func (h *fakeConns) lastHeard() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.heard) == 0 {
		return -1
	}
	return h.heard[len(h.heard)-1]
}

func (h *fakeConns) DetachFlows(b *flow.Batch) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.toHand) > 0 && b.Room() {
		r := h.toHand[0]
		h.toHand = h.toHand[1:]
		r.ClientFD, r.BackendFD = b.AddFD(r.ClientFD), flow.NoFD
		r.Streams[0].PipeR, r.Streams[0].PipeW, r.Streams[1].PipeR, r.Streams[1].PipeW = flow.NoFD, flow.NoFD, flow.NoFD, flow.NoFD
		b.Relays = append(b.Relays, r)
	}
	if len(h.toHand) > 0 {
		return 1
	}
	p := h.pending
	h.pending = 0
	return p
}

func (h *fakeConns) AdoptFlows(b *flow.Batch, stay bool) (func(), flow.Refused) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var refused flow.Refused
	var took []flow.Relay
	for i, r := range b.Relays {
		if h.refuse[r.Listener] {
			refused.Relays = append(refused.Relays, i)
			continue
		}
		fd, _ := b.FD(r.ClientFD)
		r.ClientFD = fd
		took = append(took, r)
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.ran++
		h.adopted = append(h.adopted, took...)
		for range took {
			h.stayed = append(h.stayed, stay)
		}
	}, refused
}

func (h *fakeConns) FlowsDone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done++
}

// flowsPair is an upgrader and an inheritance joined by a flows socket.
func flowsPair(t *testing.T) (*Upgrader, *Inheritance) {
	t.Helper()
	mine, theirs, err := newFlowsPair()
	if err != nil {
		t.Fatal(err)
	}
	return &Upgrader{flows: newFlowsConn(mine), log: slog.New(slog.DiscardHandler)}, &Inheritance{flows: newFlowsConn(theirs), ready: -1, feed: -1, Parent: 1}
}

// pipeConns makes n connections for the old side: pipes whose write ends
// the test keeps, to tell which read end arrived where.
func pipeConns(t *testing.T, n int) (relays []flow.Relay, writers []int) {
	t.Helper()
	for i := range n {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(p[1]) })
		name := "l"
		if i%50 == 7 {
			name = "refused"
		}
		relays = append(relays, flow.Relay{Listener: name, Client: "127.0.0.1:" + strconv.Itoa(1000+i), ClientFD: p[0]})
		writers = append(writers, p[1])
	}
	return relays, writers
}

// recordLog is a logger whose text the test reads.
func recordLog() (*slog.Logger, *testnet.LogBuffer) {
	b := &testnet.LogBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// sameFile reports whether two descriptors are the same open file.
func sameFile(a, b int) bool {
	var sa, sb unix.Stat_t
	return unix.Fstat(a, &sa) == nil && unix.Fstat(b, &sb) == nil && sa.Ino == sb.Ino && sa.Dev == sb.Dev
}

func TestFlowsHandOverMovesEveryConnectionOnce(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	const n = 300 // several batches
	relays, _ := pipeConns(t, n)
	orig := map[string]int{}
	for _, r := range relays {
		orig[r.Client] = r.ClientFD
	}
	old := &fakeConns{toHand: relays, pending: 1}
	next := &fakeConns{refuse: map[string]bool{"refused": true}}
	log, logs := recordLog()
	inh.sayHello(log)
	inh.AdoptFlows(next, log)
	res := up.HandOverFlows(context.Background(), old)
	defer up.Exiting() // its reports go on until then
	if !res.Adopting || res.Err != nil {
		t.Fatalf("hand-over: %+v", res)
	}
	refusedN := 0
	for _, r := range relays {
		if r.Listener == "refused" {
			refusedN++
		}
	}
	if res.Relays != n-refusedN || res.Kept != refusedN {
		t.Errorf("handed %d, kept %d; want %d and %d", res.Relays, res.Kept, n-refusedN, refusedN)
	}
	if !testnet.WaitUntil(20*time.Second, func() bool { return strings.Contains(logs.String(), "adopted connections from the old process") }) {
		t.Fatalf("the new side never finished: %s", logs.String())
	}
	// Every taken connection is the same file on the new side; the old
	// side closed its descriptor of it; the refused ones came back to stay.
	next.mu.Lock()
	defer next.mu.Unlock()
	if len(next.adopted) != n-refusedN {
		t.Fatalf("the new side adopted %d, want %d", len(next.adopted), n-refusedN)
	}
	for _, r := range next.adopted {
		var st unix.Stat_t
		if unix.Fstat(orig[r.Client], &st) == nil && sameFile(orig[r.Client], r.ClientFD) {
			t.Errorf("%s: the old side still holds its descriptor %d after the ack", r.Client, orig[r.Client])
		}
		unix.Close(r.ClientFD)
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	if len(old.adopted) != refusedN {
		t.Fatalf("the old side took back %d, want the %d refused", len(old.adopted), refusedN)
	}
	for i, r := range old.adopted {
		if !old.stayed[i] || r.Listener != "refused" || r.ClientFD != orig[r.Client] {
			t.Errorf("taken back: %+v stay=%v (want a refused one, its own descriptor %d, to stay)", r, old.stayed[i], orig[r.Client])
		}
		unix.Close(r.ClientFD)
	}
	if !strings.Contains(logs.String(), "refused="+strconv.Itoa(refusedN)) {
		t.Errorf("the new side's log does not count the refused: %s", logs.String())
	}
}

// A new process that says nothing before READY (an older build) or
// another version: the connections stay.
func TestFlowsWithoutAMatchingHelloStayWithTheOldProcess(t *testing.T) {
	for _, tc := range []struct {
		name, version, want string
	}{
		{"no hello", "", "did not offer"},
		{"another version", "99", "version 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testnet.CheckLeaks(t)
			up, inh := flowsPair(t)
			defer inh.flows.close()
			if tc.version != "" {
				saved := flowsVersion
				flowsVersion = tc.version
				inh.sayHello(slog.New(slog.DiscardHandler))
				flowsVersion = saved
			}
			relays, _ := pipeConns(t, 3)
			old := &fakeConns{toHand: relays}
			res := up.HandOverFlows(context.Background(), old)
			defer up.Exiting() // its reports go on until then
			if res.Adopting || !strings.Contains(res.Reason, tc.want) {
				t.Fatalf("result %+v: want no adoption, a reason naming %q", res, tc.want)
			}
			if len(old.toHand) != 3 {
				t.Errorf("%d connections detached although nobody adopts them", 3-len(old.toHand))
			}
			for _, r := range relays {
				unix.Close(r.ClientFD)
			}
		})
	}
}

// A new process that dies with a batch unacknowledged loses none of it:
// the old process takes the whole batch back, to stay.
func TestFlowsBatchUnacknowledgedWhenTheNewProcessDiesComesBack(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	relays, _ := pipeConns(t, 5)
	orig := map[string]int{}
	for _, r := range relays {
		orig[r.Client] = r.ClientFD
	}
	inh.sayHello(slog.New(slog.DiscardHandler))
	// The new side reads the first batch, then dies without a word.
	died := make(chan struct{})
	go func() {
		defer close(died)
		_, fds, _ := inh.flows.recv(0)
		closeFDs(fds)
		inh.flows.close()
	}()
	old := &fakeConns{toHand: relays}
	res := up.HandOverFlows(context.Background(), old)
	defer up.Exiting() // its reports go on until then
	<-died
	if res.Err == nil || res.Handed() != 0 || res.Kept != 5 || res.Lost != 0 {
		t.Fatalf("result %+v: want an error, nothing handed, the 5 kept, none lost", res)
	}
	for i, r := range old.adopted {
		if !old.stayed[i] || r.ClientFD != orig[r.Client] {
			t.Errorf("taken back %+v: want its own descriptor %d, to stay", r, orig[r.Client])
		}
		var st unix.Stat_t
		if err := unix.Fstat(r.ClientFD, &st); err != nil {
			t.Errorf("%s: its descriptor is gone: %v", r.Client, err)
		}
		unix.Close(r.ClientFD)
	}
}

// A new process that dies with batches unread, after acknowledging
// others, loses only what it took: the old process reads every ack still
// queued (the kernel reports the close once, ahead of them) and takes back
// only the batches never acknowledged. No connection is run by both.
func TestFlowsNewProcessDyingMidWindowLosesOnlyWhatItTook(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	relays, _ := pipeConns(t, 3*flow.MaxRecords) // three batches, all sent before the first ack
	inh.sayHello(slog.New(slog.DiscardHandler))
	taken := map[string]bool{}
	died := make(chan struct{})
	go func() {
		defer close(died)
		for acked := 0; acked < 2; {
			data, fds, err := inh.flows.recv(0)
			if err != nil {
				t.Error(err)
				return
			}
			var m flowsMessage
			json.Unmarshal(data, &m)
			if m.Type == "open" { // its count, between batches
				continue
			}
			acked++
			for _, r := range m.Batch.Relays {
				taken[r.Client] = true
			}
			closeFDs(fds)
			inh.flows.send(flowsMessage{Type: "ack", Seq: m.Seq, Refused: &flow.Refused{}}, nil)
		}
		inh.flows.close() // dies with the third batch unread
	}()
	old := &fakeConns{toHand: relays}
	res := up.HandOverFlows(context.Background(), old)
	defer up.Exiting() // its reports go on until then
	<-died
	if res.Err == nil || res.Relays != len(taken) || res.Lost != len(taken) || res.Kept != len(relays)-len(taken) {
		t.Fatalf("result %+v: want an error, %d handed and lost with the new process, %d kept", res, len(taken), len(relays)-len(taken))
	}
	for _, r := range old.adopted {
		if taken[r.Client] {
			t.Errorf("%s: taken back although the new process acknowledged it", r.Client)
		}
		unix.Close(r.ClientFD)
	}
}

// A batch too large for one message goes as several; a connection too
// large by itself stays, and the rest still go.
func TestFlowsSplitBatchesToFitTheSocket(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	up.flows.maxMessage = 4 << 10
	relays, _ := pipeConns(t, 60)
	relays[5].Streams[1].Held = make([]byte, 8<<10) // alone over the bound
	old := &fakeConns{toHand: relays}
	next := &fakeConns{}
	inh.sayHello(slog.New(slog.DiscardHandler))
	inh.AdoptFlows(next, slog.New(slog.DiscardHandler))
	res := up.HandOverFlows(context.Background(), old)
	defer up.Exiting() // its reports go on until then
	if res.Err != nil || res.Relays != 59 || res.Kept != 1 {
		t.Fatalf("result %+v: want 59 handed, 1 kept", res)
	}
	if len(old.adopted) != 1 || old.adopted[0].Client != relays[5].Client {
		t.Fatalf("kept %+v, want %s", old.adopted, relays[5].Client)
	}
	unix.Close(old.adopted[0].ClientFD)
	testnet.Eventually(t, "the new side to adopt 59", func() bool {
		next.mu.Lock()
		defer next.mu.Unlock()
		return len(next.adopted) == 59 && next.done == 1
	})
	next.mu.Lock()
	for _, r := range next.adopted {
		unix.Close(r.ClientFD)
	}
	next.mu.Unlock()
}
