package relay

import (
	"errors"

	"github.com/l4lb/l4lb/pkg/pool"
)

// The wait for recovery: a client whose dials all failed while its pool
// went, or stayed, all down (no backend usable; its one force-try of
// breaker rule 6 spent or failed) is not closed at once. It waits on its
// loop, dialing nothing, while its connect_budget lasts, for a backend to
// come back (a probe, health checks, another client's force-try closing a
// breaker); then it is planned and dialed as any client, or refused when
// the budget ends. A client closed at once would reconnect at once: in a
// reconnect storm that churn of accepts, force-tries and refusals is what
// kept the pool down, while a client held through the outage is served as
// soon as the pool recovers, as HAProxy holds one through its retries.
//
// It shares the slot queue's list, timer and retry pass (queue.go): a
// waiting client is phaseQueued and waiting, and its dialState (kept in
// c.dial, nil for a slot wait) carries its budget and its force-try.

// awaitRecovery parks the client whose candidates are spent (c.dial) until
// its pool is no longer all down, or refuses it as no backend: when it
// never dialed (no budget runs), its budget is spent, or the pool has a
// backend in rotation (its retries went on backends that failed).
func (c *conn) awaitRecovery() {
	d := c.dial
	now := c.l.r.Clock()
	if !d.budgeted || now >= d.deadline || errors.Is(d.last, pool.ErrBudget) || !c.pool.AllDown() {
		c.noBackend(errors.Join(pool.ErrNoBackend, d.last))
		return
	}
	c.phase = phaseQueued
	c.waiting = true
	c.l.waiting = append(c.l.waiting, c)
	c.l.r.Arm(&c.timer, d.deadline)
	c.l.armQueueRetry(now + queueRetry)
}

// slotWaiting reports whether the client waits for a backend slot
// (queue_timeout): the clients a hand-over moves as queued. One waiting
// for recovery is still being set up and finishes in this process.
func (c *conn) slotWaiting() bool {
	return c.phase == phaseQueued && c.waiting && c.dial == nil
}

// recoveryBudgetSpent ends a wait for recovery at the client's budget.
func (c *conn) recoveryBudgetSpent() {
	c.leaveQueue(queueTimeout)
	c.noBackend(errors.Join(pool.ErrNoBackend, pool.ErrBudget, c.dial.last))
}
