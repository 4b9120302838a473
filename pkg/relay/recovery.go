package relay

import (
	"errors"

	"github.com/l4lb/l4lb/pkg/pool"
)

// The wait for recovery: a client of an all-down pool (no backend usable)
// is not closed at once when its dials fail. It waits on its loop, dialing
// nothing, while its connect_budget lasts, for a backend to come back (a
// probe, health checks, a force-try closing a breaker); then it is planned
// and dialed as any client, or refused when the budget ends. A client
// closed at once would reconnect at once: in a reconnect storm that churn
// of accepts, force-tries and refusals is what kept the pool down, while a
// client held through the outage is served as soon as the pool recovers,
// as HAProxy holds one through its retries.
//
// Force-tries (breaker rule 6) go one at a time per backend
// (pool.TryBeginForce): a client whose force-try target has one in flight
// waits too, and may make its own force-try later if the pool is still
// down; a client makes one force-try at most. Clients released by a
// recovery go in batches, so the backend that came back first is not
// handed every waiting client in one instant while the others' probes
// (pool: an all-down recovery probes the rest at once) bring them back.
//
// It shares the slot queue's list, timer and retry pass (queue.go): a
// waiting client is phaseQueued and waiting, and its dialState (kept in
// c.dial, nil for a slot wait) carries its budget and its force-try.

// recoveryBatch bounds the waiting clients one loop releases per retry
// pass (every queueRetry) once their pool has a backend again: 256 every
// 5 ms, about 50,000 a second, which a backend's listen queue takes.
const recoveryBatch = 256

// awaitRecovery parks the client whose candidates are spent (c.dial) until
// its pool is no longer all down (or its turn to force-try comes), or
// refuses it as no backend: when no budget runs (nothing to force-try:
// every backend disabled or draining), its budget is spent, or the pool
// has a backend in rotation (its retries went on backends that failed).
func (c *conn) awaitRecovery() {
	d := c.dial
	now := c.l.r.Clock()
	if !d.budgeted && d.forceBusy {
		// It waits before any connect(2) of its own: the budget counts
		// from now.
		d.budgeted, d.deadline = true, now+int64(c.pool.ConnectBudget())
	}
	if !d.budgeted || now >= d.deadline || errors.Is(d.last, pool.ErrBudget) || !c.pool.AllDown() {
		d.endWait(c.f, queueTimeout)
		c.noBackend(errors.Join(pool.ErrNoBackend, d.last))
		return
	}
	d.waited = true
	c.phase = phaseQueued
	c.waiting = true
	c.l.waiting = append(c.l.waiting, c)
	c.l.r.Arm(&c.timer, d.deadline)
	c.l.armQueueRetry(now + queueRetry)
}

// endWait counts the end of the client's wait for recovery, if it waited:
// each wait ends once, served when the client is connected after it.
func (d *dialState) endWait(f *Front, r queueResult) {
	if d.waited {
		d.waited = false
		f.RecoveryWaits[r].Add(1)
	}
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

// recoveryPass is what one retry pass knows of the pools its waiting
// clients wait on, a record per pool (the waiting list interleaves pools
// when a loop serves several listeners, or after a reload): whether each
// is all down (one look per pool, however many clients: there may be
// thousands), whether one of its clients had a turn to force-try in this
// pass, and how many were released.
type recoveryPass struct {
	pools []poolPass
}

type poolPass struct {
	p        *pool.Pool
	down     bool
	forced   bool
	released int
}

// of is c's pool's record, made at its first client in the pass.
func (rp *recoveryPass) of(p *pool.Pool) *poolPass {
	for i := range rp.pools {
		if rp.pools[i].p == p {
			return &rp.pools[i]
		}
	}
	rp.pools = append(rp.pools, poolPass{p: p, down: p.AllDown()})
	return &rp.pools[len(rp.pools)-1]
}

// next reports whether the waiting client c leaves the wait in this pass:
// its pool is back (within the batch), or it is still down and no client
// of it has had its turn to force-try yet in this pass. A client whose
// pool a reload (or a change of membership) replaced waits on the pool
// that carries it on.
func (rp *recoveryPass) next(c *conn) bool {
	c.pool = c.pool.Current()
	pp := rp.of(c.pool)
	switch {
	case !pp.down:
		if pp.released >= recoveryBatch {
			return false
		}
		pp.released++
		return true
	case !c.dial.forced && !pp.forced:
		pp.forced = true
		return true
	}
	return false
}

// retryRecovery takes c off the queue (the pass ends its wait or parks it
// again) and plans its dials anew.
func (c *conn) retryRecovery() {
	c.waiting = false
	c.l.r.Disarm(&c.timer)
	c.phase = phaseDialing
	c.dial.forceBusy = false
	c.plan(c.dial)
}
