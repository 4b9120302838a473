package handoff

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/flow"
)

// The new process counts the old one's last report, less what it adopted
// since, never below 0, and forgets it openLife after the report or when
// the old process is gone.
func TestOldOpenCountsTheLastReportLessWhatWasAdopted(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	o := &oldOpen{clk: clk}
	if o.now() != 0 || o.waitMS() != -1 {
		t.Fatalf("before any report: %d (wait %d ms), want 0 and no wait", o.now(), o.waitMS())
	}
	o.reported(5)
	o.adopted(2)
	if o.now() != 3 {
		t.Fatalf("5 reported, 2 adopted: %d, want 3", o.now())
	}
	o.adopted(10)
	if o.now() != 0 {
		t.Fatalf("more adopted than reported: %d, want 0", o.now())
	}
	o.reported(4)
	clk.Advance(openLife - time.Millisecond)
	if o.now() != 4 || o.waitMS() != 2 {
		t.Fatalf("a millisecond before the report's end: %d (wait %d ms), want 4 and a wait to its end", o.now(), o.waitMS())
	}
	clk.Advance(time.Millisecond)
	if o.now() != 0 || o.waitMS() != -1 {
		t.Fatalf("at the report's end: %d (wait %d ms), want it forgotten", o.now(), o.waitMS())
	}
	o.reported(3)
	if o.now() != 3 {
		t.Fatalf("a report after one expired: %d, want 3", o.now())
	}
	o.gone()
	if o.now() != 0 {
		t.Fatalf("the old process gone: %d, want 0", o.now())
	}
	o.reported(-1)
	if o.now() != 0 {
		t.Fatalf("a negative report: %d, want 0", o.now())
	}
}

// Once its hand-over is done, the old process reports what it holds every
// openEvery until it exits, then closes the socket.
func TestOpenReporterReportsUntilEnded(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	defer inh.flows.close()
	clk := clock.NewFake(time.Unix(1000, 0))
	old := &fakeConns{holding: 7}
	r := startReporting(up.flows, old, clk)
	up.flows = nil // the reporter's
	read := func() flowsMessage {
		t.Helper()
		var data []byte
		testnet.EventuallyOn(t, clk, openEvery, "a report", func() bool {
			if !inh.flows.readable(0) {
				return false
			}
			var err error
			data, _, err = inh.flows.recv(0)
			if err != nil {
				t.Fatal(err)
			}
			return true
		})
		var m flowsMessage
		if err := json.Unmarshal(data, &m); err != nil || m.Type != "open" || m.Open == nil {
			t.Fatalf("message %q (%v), want an open report", data, err)
		}
		return m
	}
	if m := read(); *m.Open != 7 {
		t.Fatalf("report %d, want 7", *m.Open)
	}
	old.mu.Lock()
	old.holding = 2
	old.mu.Unlock()
	for *read().Open != 2 { // one report may have been taken before the change
	}
	r.end()
	for {
		_, _, err := inh.flows.recv(0)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after the end: %v, want the end of stream", err)
		}
	}
}

// Across a hand-over, the new side's count of the old side's connections
// is each connection once: the old side's reports, less what the new one
// adopted since; what it refused stays counted (the old side keeps it),
// and the count goes to 0 when the old side exits.
func TestFlowsCountTheOldProcessesConnectionsOnce(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	relays, _ := pipeConns(t, 3)
	relays[1].Listener = "refused"
	old := &fakeConns{toHand: relays, holding: 4} // 4 more being set up, never passed
	next := &fakeConns{refuse: map[string]bool{"refused": true}}
	log, logs := recordLog()
	inh.sayHello(log)
	inh.AdoptFlows(next, log)
	res := up.HandOverFlows(context.Background(), old)
	if res.Relays != 2 || res.Kept != 1 || !res.Reporting {
		t.Fatalf("result %+v: want 2 handed, 1 kept, and the rest reported", res)
	}
	testnet.Eventually(t, "the new side's adoption line, counting what stayed", func() bool {
		return strings.Contains(logs.String(), "still_open_there=5")
	})
	up.Exiting()
	testnet.Eventually(t, "the count to go when the old side exits", func() bool { return next.lastHeard() == 0 })
	next.mu.Lock()
	heard := slices.Clone(next.heard)
	for _, r := range next.adopted {
		closeFDs([]int{r.ClientFD})
	}
	next.mu.Unlock()
	for _, r := range old.adopted {
		closeFDs([]int{r.ClientFD})
	}
	// 4 + 3 at first; 4 + the kept one from the batch on.
	if heard[0] != 7 {
		t.Errorf("first count %d, want 7 (%v)", heard[0], heard)
	}
	for i, n := range heard[1 : len(heard)-1] {
		if n != 5 {
			t.Errorf("count %d is %d, want 5: each connection once (%v)", i+1, n, heard)
		}
	}
}

// A new process whose hello does not say "counts" (an older build) gets
// no report, which it would read as a protocol error: batches, then
// "done", then the end of stream.
func TestFlowsSendNoReportToANewProcessThatDoesNotCount(t *testing.T) {
	testnet.CheckLeaks(t)
	up, inh := flowsPair(t)
	defer inh.flows.close()
	if err := inh.flows.send(flowsHello{Format: flowsFormat, Version: flowsVersionNumber(), PID: 1}, nil); err != nil {
		t.Fatal(err)
	}
	relays, _ := pipeConns(t, 3)
	var types []string
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			data, fds, err := inh.flows.recv(0)
			closeFDs(fds)
			if err != nil {
				return
			}
			var m flowsMessage
			json.Unmarshal(data, &m)
			types = append(types, m.Type)
			if m.Type == "batch" {
				inh.flows.send(flowsMessage{Type: "ack", Seq: m.Seq, Refused: &flow.Refused{}}, nil)
			}
		}
	}()
	res := up.HandOverFlows(context.Background(), &fakeConns{toHand: relays, holding: 9})
	defer up.Exiting()
	if res.Err != nil || res.Relays != 3 || res.Reporting {
		t.Fatalf("result %+v: want the 3 handed, and nothing reported to a process that does not count", res)
	}
	select {
	case <-read:
	case <-time.After(20 * time.Second):
		t.Fatal("the old side kept the socket open after done")
	}
	if !slices.Equal(types, []string{"batch", "done"}) {
		t.Fatalf("messages %v, want a batch and done, no report", types)
	}
}
