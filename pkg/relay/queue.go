package relay

// The wait for a backend slot (queue_timeout): a client whose pool is Full
// (every usable backend at its max_connections) waits on its loop, first
// come first served, until a slot frees or its time is up. A slot freed
// on this loop (a relay ending) retries the queue at the end of the turn;
// one freed on another loop is found by a retry every queueRetry.

// queueResult is how a wait ended, as Front.Queued counts it.
type queueResult uint8

const (
	queueServed queueResult = iota
	queueTimeout
	queueLeft
	numQueueResults
)

var queueResultNames = [numQueueResults]string{"served", "timeout", "left"}

// QueueResults lists every way a wait ends, for the metric's label.
var QueueResults = [numQueueResults]string(queueResultNames)

// queueRetry bounds how late a waiting client hears of a slot freed on
// another loop.
const queueRetry = 5 * 1e6 // 5ms, in loop-clock nanoseconds

// queueForSlot parks the client until a slot frees or queue_timeout runs
// out (counted from when it first queued); without a queue_timeout it is
// refused at once.
func (c *conn) queueForSlot() {
	qt := c.pool.QueueTimeout()
	if qt <= 0 {
		c.refuseBy(CloseBackendCap, false)
		return
	}
	now := c.l.r.Clock()
	if d := c.dial; d != nil {
		if d.budgeted || d.forced {
			c.spent = &spentBudget{left: max(0, d.deadline-now), budgeted: d.budgeted, forced: d.forced}
		}
		c.l.dials.put(d)
	}
	c.dial = nil
	if c.phase == phaseQueued {
		return
	}
	c.phase = phaseQueued
	if c.queuedAt == 0 {
		c.queuedAt = now
	}
	c.waiting = true
	c.l.waiting = append(c.l.waiting, c)
	c.l.r.Arm(&c.timer, c.queuedAt+qt)
	c.l.armQueueRetry(now + queueRetry)
}

// leaveQueue takes the client off the queue, counting how its wait ended.
func (c *conn) leaveQueue(r queueResult) {
	if !c.waiting {
		return
	}
	c.waiting = false
	if c.dial != nil {
		c.dial.endWait(c.f, r)
	} else {
		c.f.Queued[r].Add(1)
	}
	c.l.r.Disarm(&c.timer)
	// The slice entry goes at the next retry pass.
}

// slotFreed is called when a relay of this loop ends: if clients wait,
// they are retried once this turn's events are done.
func (l *Loop) slotFreed() {
	if len(l.waiting) > 0 {
		l.armQueueRetry(l.r.Clock())
	}
}

func (l *Loop) armQueueRetry(at int64) {
	if l.queueTimer.Armed() && l.queueTimer.At() <= at {
		return // an earlier retry is armed
	}
	l.r.Arm(&l.queueTimer, at)
}

// retryQueued dials for the waiting clients, oldest first, while their
// pools have room (or, for a wait for recovery, a backend back); the rest
// wait for the next retry. A client that loses its slot to another loop
// queues again, keeping its deadline; one that finds its pool all down
// again waits on within its budget.
func (l *Loop) retryQueued() {
	waiting := l.waiting
	kept := waiting[:0]
	var rp recoveryPass
	for _, c := range waiting {
		if !c.waiting {
			continue // left or timed out
		}
		if c.dial != nil {
			if !rp.next(c) {
				kept = append(kept, c)
				continue
			}
			c.retryRecovery() // one back in the wait is appended past len(waiting)
			continue
		}
		if c.pool.Full() {
			kept = append(kept, c)
			continue
		}
		c.waiting = false
		l.r.Disarm(&c.timer)
		c.phase = phaseDialing
		c.startDial() // re-queued clients are appended past len(waiting)
		if c.phase != phaseQueued {
			c.f.Queued[queueServed].Add(1)
		}
	}
	kept = append(kept, l.waiting[len(waiting):]...)
	clear(l.waiting[len(kept):])
	l.waiting = kept
	if len(l.waiting) > 0 {
		l.armQueueRetry(l.r.Clock() + queueRetry)
	}
}
