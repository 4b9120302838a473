package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/relay"
)

// An operator's drain: new clients go elsewhere at once, a stream that
// ends before the deadline ends normally, one still open flows until the
// deadline and is reset at it (counted as "drained"), and Enable takes
// the backend back. No assertion reads the test's clock: "before the
// deadline" is a drain an hour long, "at the deadline" is the pool's cut.
func TestDrainBackend(t *testing.T) {
	noLeaks(t)
	a := testnet.StartBackend(t, "A", "")
	b := testnet.StartBackend(t, "B", "")
	l := startLB(t, policyTOML(t, "", "", "round-robin", "", beSpec{addr: a.Addr}, beSpec{addr: b.Addr}), 0)
	p := l.pools["p"]
	ctx := context.Background()
	ba, _ := p.Backend(a.Addr)
	bb, _ := p.Backend(b.Addr)

	// Two long-lived streams on A, none on B.
	if err := p.SetWeight(ctx, bb, 0); err != nil {
		t.Fatal(err)
	}
	finishing := dialFrom(t, "127.0.0.1", l.addr)
	staying := dialFrom(t, "127.0.0.1", l.addr)
	if tag := servedBy(t, finishing); tag != "A" {
		t.Fatalf("first stream on %s", tag)
	}
	if tag := servedBy(t, staying); tag != "A" {
		t.Fatalf("second stream on %s", tag)
	}
	if err := p.SetWeight(ctx, bb, 1); err != nil {
		t.Fatal(err)
	}
	if n := ba.Active(); n != 2 {
		t.Fatalf("backend A holds %d connections, want 2", n)
	}

	if err := p.Drain(ctx, ba, -time.Second); err == nil {
		t.Fatal("a drain with a negative timeout was accepted")
	}
	// A first drain whose deadline is an hour off: whatever the streams
	// below do meets it long before, however slow the machine, so a reset
	// in this phase could only be a cut before the deadline.
	if err := p.Drain(ctx, ba, time.Hour); err != nil {
		t.Fatal(err)
	}
	if !ba.Draining() || ba.Admits() {
		t.Fatalf("backend A draining %v, admits %v", ba.Draining(), ba.Admits())
	}

	// The stream the client finishes in time ends normally: every byte,
	// then a clean EOF.
	payload := []byte(strings.Repeat("finishing before the deadline ", 1000))
	if _, err := finishing.Write(payload); err != nil {
		t.Fatal(err)
	}
	finishing.CloseWrite()
	finishing.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(finishing)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("finishing stream: %d of %d bytes, %v", len(got), len(payload), err)
	}

	// New clients go to B only during the drain.
	for i := range 6 {
		tag, err := testnet.Hello(l.addr, "")
		if err != nil || tag != "B" {
			t.Fatalf("client %d during the drain: %q, %v", i, tag, err)
		}
	}

	// Before the deadline the stream left open still flows, byte-exact,
	// and A still counts it.
	echoed(t, staying, []byte("still open before the deadline"))
	testnet.Eventually(t, "backend A to hold only the open stream", func() bool { return ba.Active() == 1 })
	if n, cut := l.closesOf("front").Closed[relay.CloseDrained], l.cuts.Load(); n != 0 || cut != 0 {
		t.Fatalf("before the deadline: %d streams closed as drained, %d cuts", n, cut)
	}

	// A new drain replaces the running one: at its deadline the stream
	// still open is reset, by the deadline's cut (counted before the cut
	// resets anything), and the cut counts it as drained.
	const timeout = 200 * time.Millisecond
	if err := p.Drain(ctx, ba, timeout); err != nil {
		t.Fatal(err)
	}
	staying.SetReadDeadline(time.Now().Add(20 * time.Second))
	b1, err := io.ReadAll(staying)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("open stream at the deadline: %q, %v; want a reset", b1, err)
	}
	if n := l.cuts.Load(); n != 1 {
		t.Fatalf("open stream reset with %d deadline cuts made, want 1: the reset did not come from the deadline", n)
	}
	waitCloses(t, l, relay.CloseDrained, 1)
	waitCloses(t, l, relay.CloseCompleted, 7)
	testnet.Eventually(t, "backend A to hold nothing", func() bool { return ba.Active() == 0 })
	for i := range 4 {
		tag, err := testnet.Hello(l.addr, "")
		if err != nil || tag != "B" {
			t.Fatalf("client %d after the deadline: %q, %v", i, tag, err)
		}
	}
	if d, ok := ba.DrainState(); !ok || d.Deadline.Sub(d.Since) != timeout {
		t.Fatalf("drain state %+v, %v", d, ok)
	}

	// Enable ends the drain: A takes new clients again.
	if err := p.Enable(ctx, ba); err != nil {
		t.Fatal(err)
	}
	if ba.Draining() {
		t.Fatal("backend A still draining after Enable")
	}
	seen := map[string]int{}
	for range 4 {
		tag, err := testnet.Hello(l.addr, "")
		if err != nil {
			t.Fatal(err)
		}
		seen[tag]++
	}
	if seen["A"] != 2 || seen["B"] != 2 {
		t.Fatalf("after Enable, round robin over both: %v, want 2 each", seen)
	}
	waitCloses(t, l, relay.CloseCompleted, 15)
	checkFrontCloses(t, l, map[relay.CloseReason]int64{relay.CloseDrained: 1, relay.CloseCompleted: 15})
}

// The deadline cuts only for the drain it was set for: an Enable before
// it, or a new drain with a later deadline, keeps the open streams; a new
// drain with an earlier deadline cuts at that one.
func TestDrainDeadlineReplaced(t *testing.T) {
	type step struct {
		enable  bool
		timeout time.Duration
	}
	const firstDeadline = time.Second
	for _, tc := range []struct {
		name  string
		steps []step
		cut   bool
	}{
		// The first deadline (firstDeadline) must not pass before the step
		// that replaces it, two calls later: a second leaves room for a
		// machine that stalls the test.
		{"enable-before-deadline", []step{{timeout: firstDeadline}, {enable: true}}, false},
		{"redrain-later", []step{{timeout: firstDeadline}, {timeout: time.Hour}}, false},
		{"redrain-sooner", []step{{timeout: time.Hour}, {timeout: 100 * time.Millisecond}}, true},
		{"at-once", []step{{timeout: 0}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			a := testnet.StartBackend(t, "A", "")
			w := testnet.StartBackend(t, "W", "") // the witness: drained after, cut for sure
			l := startLB(t, policyTOML(t, "", "", "round-robin", "", beSpec{addr: a.Addr}, beSpec{addr: w.Addr}), 0)
			p := l.pools["p"]
			ba, _ := p.Backend(a.Addr)
			bw, _ := p.Backend(w.Addr)
			c := dialFrom(t, "127.0.0.1", l.addr)
			if tag := servedBy(t, c); tag != "A" {
				t.Fatalf("first stream on %s", tag)
			}
			cw := dialFrom(t, "127.0.0.1", l.addr)
			if tag := servedBy(t, cw); tag != "W" {
				t.Fatalf("second stream on %s", tag)
			}
			ctx := context.Background()
			for _, s := range tc.steps {
				var err error
				if s.enable {
					err = p.Enable(ctx, ba)
				} else {
					err = p.Drain(ctx, ba, s.timeout)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if tc.cut {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("stream at the deadline: %v, want a reset", err)
				}
				waitCloses(t, l, relay.CloseDrained, 1)
				echoed(t, cw, []byte("the other backend's stream goes on"))
				return
			}
			// The witness's drain ends after the first deadline (it
			// begins later and lasts longer): once its stream is cut, a
			// wrong cut of A's would have come too.
			if err := p.Drain(ctx, bw, firstDeadline+500*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			cw.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.ReadAll(cw); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("witness stream at its deadline: %v, want a reset", err)
			}
			waitCloses(t, l, relay.CloseDrained, 1)
			echoed(t, c, []byte("still here"))
			if n := l.closesOf("front").Closed[relay.CloseDrained]; n != 1 {
				t.Fatalf("%d streams cut, want only the witness's", n)
			}
		})
	}
}

// A client queued for a slot of the only backend, which is then drained,
// does not wait out its queue_timeout: it leaves the queue at once and is
// refused for want of a backend.
func TestDrainWhileQueued(t *testing.T) {
	noLeaks(t)
	a := testnet.StartBackend(t, "A", "")
	l := startLB(t, policyTOML(t, "", "", "round-robin", `queue_timeout = "30s"`, beSpec{addr: a.Addr, maxConns: 1}), 0)
	p := l.pools["p"]
	ba, _ := p.Backend(a.Addr)
	c1 := dialFrom(t, "127.0.0.1", l.addr)
	servedBy(t, c1)
	c2 := dialFrom(t, "127.0.0.1", l.addr)
	testnet.Eventually(t, "l4lb to accept the second client", func() bool { return l.server.Active() == 2 })
	l.barrier()
	if err := p.Drain(context.Background(), ba, time.Hour); err != nil {
		t.Fatal(err)
	}
	// What ended the wait is read from the queue's counters below, not
	// from the test's clock (and refused's 20s read deadline is shorter
	// than the 30s queue_timeout: a client left waiting fails there).
	refused(t, c2, false)
	waitCloses(t, l, relay.CloseNoBackend, 1)
	// The wait's end is counted once its dial returns, after the close.
	var q [3]int64
	testnet.Eventually(t, "the wait's end counted", func() bool {
		q = l.closesOf("front").Queued
		return q[0]+q[1]+q[2] >= 1
	})
	if q[0]+q[1]+q[2] != 1 || q[1] != 0 || q[2] != 0 {
		t.Fatalf("queued (served, timeout, left) = %v: want the one wait ended by the drain, not by timeout or leaving", q)
	}
	echoed(t, c1, []byte("the open stream goes on"))
}
