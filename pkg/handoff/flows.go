package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/clock"
	"github.com/l4lb/l4lb/pkg/flow"
)

// The hand-over of established connections (the flows socket, flowwire.go):
// once the new process serves, the old one detaches its connections in
// batches and passes each to it, keeping its own descriptors until the new
// process acknowledges the batch. The new process puts a batch's
// connections together held still (nothing moves), acknowledges it,
// naming what it refuses, and only then lets them run; the old process
// then closes its copies (the connections go on: the new process holds
// the same sockets) and adopts back what was refused, to drain it. So a
// connection is run by one process at a time, and a new process that dies
// before it acknowledges a batch loses none of it: the old one adopts it
// back. A batch it acknowledged died with it, and the old process's log
// says how many connections that was.
//
// The new process says hello, with its version, before it says READY; a
// READY without a hello before it (an older build, or none that speaks
// this version) leaves the connections with the old process, to drain.

// FlowHolder is a serving process's connections as the hand-over moves
// them (pkg/server.Server).
type FlowHolder interface {
	// DetachFlows moves established connections into b while it has
	// room; pending counts the connections still being set up (a dial, a
	// PROXY header), handed over once established, and is 0 only when
	// nothing more is left to hand over.
	DetachFlows(b *flow.Batch) (pending int)
	// AdoptFlows puts b's connections together held still and returns the
	// function that lets them run (it returns once they count in
	// Holding, so a report or a lowered HeldElsewhere after it misses
	// none), and the records it refuses (whose descriptors it did not
	// take). stay: adopted back, never detached again.
	AdoptFlows(b *flow.Batch, stay bool) (run func(), refused flow.Refused)
	// FlowsDone says the new process's hand-over is over: what waited
	// for all of it (clients queued for a slot, which must find every
	// relay counted on its backend) goes on.
	FlowsDone()
	// Holding is how many client connections the holder counts against
	// max_connections now (its own, and any an older process still
	// holds), for the old process's reports (oldopen.go).
	Holding() int64
	// HeldElsewhere says the old process holds n client connections the
	// new process's cap counts too (oldopen.go); 0: none, or forgotten.
	HeldElsewhere(n int64)
}

// flowsPoll is how often the old process looks again for connections
// still being set up.
const flowsPoll = 20 * time.Millisecond

// flowsWindow bounds the batches travelling at once (at most 1,000
// descriptors in flight, well within the kernel's per-user bound).
const flowsWindow = 4

// FlowsResult is what a hand-over did, for the old process's log.
type FlowsResult struct {
	Adopting                 bool   // the new process speaks this protocol
	Reason                   string // !Adopting: why not
	Relays, Queued, Sessions int
	// Kept counts connections the new process refused, and Lost the ones
	// it had acknowledged when it died (they died with it).
	Kept, Lost int
	Err        error // the hand-over ended early (the new process died)
	Took       time.Duration
	// Reporting: the new process counts this one's open connections
	// (its hello said so) and is sent them until this process exits.
	Reporting bool
}

// Handed is the number of connections handed over.
func (r FlowsResult) Handed() int { return r.Relays + r.Queued + r.Sessions }

// HandOverFlows passes h's established connections to the new process of
// the upgrade Attempt just made, until h has none left to pass or ctx
// ends (a second stop signal: what was not passed then stays here). Call
// it once, after Attempt returned ok, before the listeners and sessions
// close.
func (u *Upgrader) HandOverFlows(ctx context.Context, h FlowHolder) FlowsResult {
	c := u.flows
	u.flows = nil
	if c == nil {
		return FlowsResult{Reason: "no flows socket (the upgrade was not made)"}
	}
	start := time.Now()
	counts, reason := c.awaitHello()
	if reason != "" {
		c.close()
		return FlowsResult{Reason: reason}
	}
	ho := &handover{c: c, h: h, ctx: ctx, log: u.log, res: FlowsResult{Adopting: true}, counts: counts}
	ho.run()
	ho.res.Took = time.Since(start)
	if counts && ho.res.Err == nil {
		u.reporter = startReporting(c, h, clock.Real{}) // until this process exits: it closes c
		ho.res.Reporting = true
	} else {
		c.close()
	}
	return ho.res
}

// handover is one hand-over's old side. Up to flowsWindow batches travel
// at once, so the new process adopts one while this one detaches the
// next; each stays this process's until its ack, and acks come in order.
type handover struct {
	c        *flowsConn
	h        FlowHolder
	ctx      context.Context
	log      *slog.Logger
	res      FlowsResult
	seq      int
	inflight []*flow.Batch // sent, in order, not yet acknowledged
	counts   bool          // the new process reads "open" reports
}

// reportOpen tells the new process how many client connections this one
// holds (oldopen.go), if it reads that. A failure to is the next send's
// or ack's to find.
func (ho *handover) reportOpen() {
	if ho.counts {
		ho.c.sendOpen(ho.ctx, ho.h.Holding())
	}
}

func (ho *handover) run() {
	ho.reportOpen()
	for ho.ctx.Err() == nil {
		if len(ho.inflight) < flowsWindow {
			b := &flow.Batch{}
			pending := ho.h.DetachFlows(b)
			if b.Len() > 0 {
				if err := ho.send(b); err != nil {
					ho.endEarly(err)
					return
				}
				continue
			}
			if pending == 0 && len(ho.inflight) == 0 {
				ho.reportOpen()
				ho.c.send(flowsMessage{Type: "done", Relays: ho.res.Relays, Queued: ho.res.Queued, Sessions: ho.res.Sessions}, nil)
				return
			}
			if len(ho.inflight) == 0 {
				select { // connections still being set up
				case <-ho.ctx.Done():
				case <-time.After(flowsPoll):
				}
				ho.reportOpen() // some closed meanwhile, maybe
				continue
			}
		}
		if err := ho.acknowledged(); err != nil {
			ho.endEarly(err)
			return
		}
	}
	ho.endEarly(fmt.Errorf("a second stop signal: %w", context.Cause(ho.ctx)))
}

// send passes b, as several messages if one would be too large for the
// socket. What cannot be sent (the socket failed, or one record alone is
// too large) is adopted back.
func (ho *handover) send(b *flow.Batch) error {
	data, err := ho.c.encodeBatch(ho.seq+1, b)
	if errors.Is(err, errTooLarge) {
		if b.Len() == 1 {
			ho.takeBack(b, "a connection too large to pass in one message")
			return nil
		}
		first, second := b.Halves()
		if err := ho.send(first); err != nil {
			ho.takeBack(second, "")
			return err
		}
		return ho.send(second)
	}
	if err == nil {
		err = ho.c.sendData(ho.ctx, data, b.FDs)
	}
	if err != nil {
		ho.takeBack(b, "") // never sent
		return fmt.Errorf("send batch %d: %w", ho.seq+1, err)
	}
	ho.seq++
	ho.inflight = append(ho.inflight, b)
	return nil
}

// acknowledged takes the oldest batch's ack: this process closes its
// descriptors of what the new process took and adopts back the rest.
func (ho *handover) acknowledged() error {
	b := ho.inflight[0]
	seq := ho.seq - len(ho.inflight) + 1
	refused, err := ho.c.awaitAck(ho.ctx, seq)
	if err != nil {
		return err
	}
	ho.inflight = ho.inflight[1:]
	kept, taken := b.Split(refused)
	closeFDs(taken)
	ho.takeBack(kept, "")
	ho.reportOpen() // what was taken back counts here again
	ho.res.Relays += len(b.Relays) - len(kept.Relays)
	ho.res.Queued += len(b.Queued) - len(kept.Queued)
	ho.res.Sessions += len(b.Sessions) - len(kept.Sessions)
	return nil
}

// endEarly ends a hand-over that failed (err): the socket broke, the new
// process went away or said something else, or a second stop signal came.
// The batches in flight may have been taken: with the new process alive,
// this process stops sending and reads the acks still coming until the
// new process closes its end; only a batch unacknowledged then is adopted
// back. At a second stop signal nothing more is waited for: this process
// exits, closing its copies, and a batch the new process took lives on
// there.
func (ho *handover) endEarly(err error) {
	ho.res.Err = err
	if ho.ctx.Err() != nil {
		return
	}
	unix.Shutdown(ho.c.fd, unix.SHUT_WR) // the new process reads what is queued, then EOF
	for len(ho.inflight) > 0 {
		if ho.acknowledged() != nil {
			break
		}
	}
	gone := len(ho.inflight) > 0 || errors.Is(err, io.EOF) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET)
	for _, b := range ho.inflight {
		ho.takeBack(b, "")
	}
	ho.inflight = nil
	if gone {
		// The new process is gone: what it acknowledged went with it.
		ho.res.Lost = ho.res.Handed()
	}
}

// takeBack adopts b back into this process, to stay, and counts it as
// kept; what even this process cannot carry on is reset and closed, with
// a log line (why, if given, is the reason it is taken back).
func (ho *handover) takeBack(b *flow.Batch, why string) {
	if b.Len() == 0 {
		return
	}
	if why != "" {
		ho.log.Warn("upgrade: connections kept here", "connections", b.Len(), "reason", why)
	}
	ho.res.Kept += b.Len()
	run, refused := ho.h.AdoptFlows(b, true)
	run()
	if refused.Len() > 0 {
		resetFDs(b.FDsOf(refused))
		ho.log.Error("upgrade: connections neither process could carry on were reset", "connections", refused.Len())
	}
}

// awaitHello reads the new process's hello, which it sent before READY:
// already here, or never coming. It returns why the new process does not
// adopt, or "", and whether it reads "open" reports.
func (c *flowsConn) awaitHello() (counts bool, reason string) {
	data, fds, err := c.recv(unix.MSG_DONTWAIT)
	closeFDs(fds)
	switch {
	case err == unix.EAGAIN:
		return false, "it did not offer to (a build without the hand-over of connections)"
	case err != nil:
		return false, fmt.Sprintf("its offer could not be read: %v", err)
	}
	var h flowsHello
	if err := json.Unmarshal(data, &h); err != nil || h.Format != flowsFormat {
		return false, fmt.Sprintf("its offer is not one this build reads: %.100q", data)
	}
	if h.Version != flowsVersionNumber() {
		return false, fmt.Sprintf("it speaks version %d of the hand-over, this build %s", h.Version, flowsVersion)
	}
	return h.Counts, ""
}

// awaitAck waits for batch seq's acknowledgement.
func (c *flowsConn) awaitAck(ctx context.Context, seq int) (flow.Refused, error) {
	var data []byte
	var fds []int
	var err error
	for {
		for !c.readable(100) {
			if ctx.Err() != nil {
				return flow.Refused{}, fmt.Errorf("batch %d unacknowledged at a second stop signal: %w", seq, context.Cause(ctx))
			}
		}
		if data, fds, err = c.recv(unix.MSG_DONTWAIT); err != unix.EAGAIN {
			break
		}
	}
	closeFDs(fds)
	if err != nil {
		return flow.Refused{}, fmt.Errorf("batch %d: the new process is gone: %w", seq, err)
	}
	var m flowsMessage
	if err := json.Unmarshal(data, &m); err != nil || m.Type != "ack" || m.Seq != seq {
		return flow.Refused{}, fmt.Errorf("batch %d: not its acknowledgement: %.100q", seq, data)
	}
	if m.Refused == nil {
		return flow.Refused{}, nil
	}
	return *m.Refused, nil
}

// LogFlows writes the old process's line for what HandOverFlows did.
func LogFlows(log *slog.Logger, res FlowsResult, open int64, drain time.Duration) {
	if !res.Adopting {
		log.Info("upgrade: the new process does not adopt connections; they stay here and drain",
			"reason", res.Reason, "open", open, "upgrade_drain_timeout", drainText(drain))
		return
	}
	args := []any{"relays", res.Relays, "queued", res.Queued, "sessions", res.Sessions,
		"took", res.Took.Round(time.Millisecond).String()}
	if res.Kept > 0 {
		args = append(args, "kept", res.Kept)
	}
	if res.Err != nil {
		log.Error("upgrade: the hand-over of established connections ended early; what was not handed over stays here and drains",
			append(args, "lost_with_the_new_process", res.Lost, "error", res.Err)...)
		return
	}
	log.Info("upgrade: handed over established connections", args...)
}

func drainText(d time.Duration) string {
	if d <= 0 {
		return "0 (until they close)"
	}
	return d.String()
}

// AdoptFlows is the new process's side: once it serves, it takes the
// connections the old process passes into h until the old one is done
// (or gone), then logs what it adopted. It returns at once, with a
// channel closed when that is over (at once without an upgrade that
// passes connections); the work goes on in a goroutine.
func (in *Inheritance) AdoptFlows(h FlowHolder, log *slog.Logger) (done <-chan struct{}) {
	over := make(chan struct{})
	if in.flows == nil {
		close(over)
		return over
	}
	c := in.flows
	in.flows = nil
	go func() {
		defer c.close()
		defer h.HeldElsewhere(0) // the old process is gone, or no longer says
		count := &oldOpen{clk: clock.Real{}}
		n, err := c.adopt(h, count, log)
		h.FlowsDone()
		close(over)
		if err != nil {
			log.Warn("upgrade: the old process ended the hand-over of connections early", "error", err,
				"relays", n.Relays, "queued", n.Queued, "sessions", n.Sessions, "from_pid", in.Parent)
			return
		}
		log.Info("upgrade: adopted connections from the old process", "relays", n.Relays, "queued", n.Queued,
			"sessions", n.Sessions, "refused", n.Kept, "from_pid", in.Parent, "still_open_there", count.now())
		c.followOpen(h, count)
	}()
	return over
}

// followOpen counts the old process's reports after its hand-over, until
// it closes the socket (it exited) or says anything else.
func (c *flowsConn) followOpen(h FlowHolder, count *oldOpen) {
	for {
		data, fds, err := c.next(h, count)
		closeFDs(fds)
		var m flowsMessage
		if err != nil || json.Unmarshal(data, &m) != nil || m.Type != "open" || m.Open == nil {
			count.gone()
			return
		}
		count.reportTo(h, *m.Open)
	}
}

// adopt takes batches until "done" or the old process's close, counting
// the old process's reports meanwhile.
func (c *flowsConn) adopt(h FlowHolder, count *oldOpen, log *slog.Logger) (FlowsResult, error) {
	var n FlowsResult
	for {
		data, fds, err := c.next(h, count)
		if err != nil && !errors.Is(err, errFDsLost) {
			return n, err
		}
		var m flowsMessage
		if jerr := json.Unmarshal(data, &m); jerr != nil {
			closeFDs(fds)
			return n, fmt.Errorf("not a flows message: %w", jerr)
		}
		if m.Type == "done" {
			closeFDs(fds)
			return n, nil
		}
		if m.Type == "open" && m.Open != nil {
			closeFDs(fds)
			count.reportTo(h, *m.Open)
			continue
		}
		if m.Type != "batch" || m.Batch == nil {
			closeFDs(fds)
			return n, fmt.Errorf("unexpected flows message %q", m.Type)
		}
		b := m.Batch
		b.FDs = fds
		var run func()
		var refused flow.Refused
		if err != nil || len(fds) != m.FDs {
			// Which records the missing descriptors belonged to is
			// unknown: the old process keeps the whole batch.
			refused, run = flow.All(b), func() {}
			log.Warn("upgrade: a batch of connections refused: its descriptors did not all arrive", "error", err,
				"want", m.FDs, "got", len(fds))
		} else {
			run, refused = h.AdoptFlows(b, false)
		}
		closeFDs(b.FDsOf(refused)) // the old process keeps its own
		if err := c.send(flowsMessage{Type: "ack", Seq: m.Seq, Refused: &refused}, nil); err != nil {
			// The old process is gone: nobody else holds them now.
			run()
			return n, fmt.Errorf("acknowledge batch %d: %w", m.Seq, err)
		}
		run()
		count.adopted(len(b.Relays) - len(refused.Relays) + len(b.Queued) - len(refused.Queued))
		h.HeldElsewhere(count.now())
		n.Kept += refused.Len()
		n.Relays += len(b.Relays) - len(refused.Relays)
		n.Queued += len(b.Queued) - len(refused.Queued)
		n.Sessions += len(b.Sessions) - len(refused.Sessions)
	}
}

// sayHello tells the old process this one adopts connections, in this
// protocol's version; before READY, so the old process finds it there.
func (in *Inheritance) sayHello(log *slog.Logger) {
	if in.flows == nil {
		return
	}
	h := flowsHello{Format: flowsFormat, Version: flowsVersionNumber(), PID: os.Getpid(), Counts: true}
	if err := in.flows.send(h, nil); err != nil {
		log.Warn("upgrade: cannot offer to adopt the old process's connections; they stay there", "error", err)
		in.flows.close()
		in.flows = nil
	}
}
