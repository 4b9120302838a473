package pool

import (
	"crypto/sha256"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
)

// The event loop dials backends itself, without blocking: these are the
// pool's side of that, so the rules (candidate order, force-try, the
// breaker's generation captured before connect(2), in-flight counting,
// count_early_reset) live here, whoever makes the connect.

var (
	// ErrNoBackend: every allowed attempt failed, or no backend can be tried.
	ErrNoBackend = errors.New("no backend could be dialed")
	// ErrBudget: the pool's connect_budget ran out before a backend answered.
	ErrBudget = errors.New("connect budget spent")
)

// MaxCandidates bounds 1 + retries, the first dial and every retry the
// config allows, so a caller can keep the candidate list in a fixed array.
const MaxCandidates = 1 + config.MaxRetries

// Plan returns the backends, by index, to try in order for a client at
// src: up to 1+retries usable ones with a free slot, of the set serving
// (the primaries while one is in rotation, else the backups; backup.go).
// Retries the primaries cannot fill go to the backups, after them: a
// client whose every primary failed its dials (just gone, not yet known
// down) reaches a backup rather than failing, as nginx's retries do.
// When none is usable it returns the one backend to force-try (breaker
// rule 6), a primary unless every primary is disabled or draining, with
// force set, or nothing when every backend is. Nothing without force
// means the pool is Full: usable backends exist, all at their cap.
func (p *Pool) Plan(src netip.AddrPort, buf []int) (cands []int, force bool) {
	n := min(1+p.cfg.Retries, MaxCandidates)
	cands = buf[:0]
	if s := p.serving(); s != nil {
		if cands = s.pickFor(src, n, cands); len(cands) > 0 {
			if len(cands) < n && s == p.primaries && p.backups.inRotation.Load() > 0 {
				cands = p.backups.pickFor(src, n-len(cands), cands)
			}
			return cands, false
		}
		if s.full() {
			return cands, false
		}
	}
	var order [64]int
	idx := p.primaries.orderFor(src, order[:0])
	nPrimaries := len(idx)
	idx = p.backups.orderFor(src, idx)
	// A slot freed, or a backend came back, since the pick (another
	// loop's relay ended), or the set serving went out during it: that is
	// no all-down pool, and a force-try would ignore max_connections. Dial
	// such backends as the client's own, the primaries if one admits.
	for _, part := range [2][]int{idx[:nPrimaries], idx[nPrimaries:]} {
		for _, i := range part {
			if len(cands) < n && p.backends[i].Admits() {
				cands = append(cands, i)
			}
		}
		if len(cands) > 0 {
			return cands, false
		}
	}
	for _, part := range [2][]int{idx[:nPrimaries], idx[nPrimaries:]} {
		if i, ok := p.forceTarget(part); ok {
			return append(buf[:0], i), true
		}
	}
	return buf[:0], true
}

// KeyFor is what the pool's hashing pickers hash for a client at src
// whose ClientHello named serverName: with hash_key = "sni" and a name, an
// address derived from the name alone (the first 16 bytes of its SHA-256),
// so one server name always reaches one backend, whichever client sends
// it; else src.
func (p *Pool) KeyFor(src netip.AddrPort, serverName string) netip.AddrPort {
	if p.cfg.HashKey != config.HashKeySNI || serverName == "" {
		return src
	}
	sum := sha256.Sum256([]byte(serverName))
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sum[:16])), 0)
}

// AllDown reports whether no backend of the pool would take a new client
// for any reason but a full slot: neither set has one in rotation
// (usable, not draining, a weight above 0; the sets' counts, backup.go).
// It is Plan's condition for a force-try (breaker rule 6), and what a
// client waiting for recovery waits to end.
func (p *Pool) AllDown() bool { return p.serving() == nil }

// forceTarget is the non-disabled backend of idx with the least cooldown
// left, ties in idx, the picker's order for this client (so hash affinity
// holds). Plan asks for one of the primaries first, then of the backups.
func (p *Pool) forceTarget(idx []int) (int, bool) {
	var states [64]breaker.State
	st := states[:0]
	for _, i := range idx {
		s := p.backends[i].breaker.State()
		// A draining backend takes no new client, force-tried or not:
		// the operator took it out as surely as a disable does.
		s.Disabled = s.Disabled || p.backends[i].Draining()
		st = append(st, s)
	}
	k, ok := breaker.ChooseForceTry(st)
	if !ok {
		return 0, false
	}
	return idx[k], true
}

// At returns the backend at index i of the pool (as Plan lists them).
func (p *Pool) At(i int) *Backend { return p.backends[i] }

// Dial is one connect attempt made by the caller: the backend, the kind,
// and the breaker generation it captured.
type Dial struct {
	Backend *Backend
	kind    DialKind
	attempt breaker.Attempt
	forcing bool // holds Backend's force-try slot (TryBeginForce) until its outcome
}

// BeginDial starts an attempt on b: it counts against b from now (a dial
// in flight is load, see Backend.active) and captures b's breaker
// generation. Call it right before connect(2), and EndDial (or Pending)
// with the outcome.
func (p *Pool) BeginDial(b *Backend, force bool) Dial {
	b.active.Add(1)
	b.loadChanged()
	return p.beginDial(b, force)
}

func (p *Pool) beginDial(b *Backend, force bool) Dial {
	k, bk := DialClient, breaker.KindClient
	if force {
		k, bk = DialForce, breaker.KindForce
	}
	return Dial{Backend: b, kind: k, attempt: b.breaker.Begin(bk)}
}

// EndDial records the attempt's outcome in the dial counters and with the
// breaker. An attempt that did not connect gives back its count; one that
// did keeps it until EndRelay.
func (p *Pool) EndDial(d Dial, o dialer.Outcome) {
	d.endForce()
	d.Backend.countDial(d.kind, o)
	d.Backend.breaker.Done(d.attempt, breakerResult(o))
	if o != dialer.Success {
		d.Backend.active.Add(-1)
		d.Backend.loadChanged()
	}
}

// Pending is EndDial for a connect that succeeded when the pool judges a
// dial by the backend's first move (count_early_reset): the result waits
// for Settle. It returns nil when the pool settles at connect, after
// recording the success.
func (p *Pool) Pending(d Dial) *Settlement {
	if !p.cfg.Breaker.CountEarlyReset {
		p.EndDial(d, dialer.Success)
		return nil
	}
	d.endForce() // connected: the next force-try may go, whatever the verdict
	return &Settlement{d: d}
}

// TryBeginForce is BeginDial for a TCP client's all-down force-try (rule
// 6): ok is false, and nothing is counted, while another force-try of b is
// in flight in this process. One at a time: a backend that is out gets
// one client's connection to show whether it is back, not every waiting
// client's at once (a reconnect storm's SYNs would overflow its listen
// queue as it comes back, and the timeouts keep it out).
func (p *Pool) TryBeginForce(b *Backend) (Dial, bool) {
	if !b.forcing.CompareAndSwap(false, true) {
		return Dial{}, false
	}
	b.active.Add(1)
	b.loadChanged()
	d := p.beginDial(b, true)
	d.forcing = true
	return d, true
}

// endForce gives back the force-try slot d holds, once: at its outcome.
func (d *Dial) endForce() {
	if d.forcing {
		d.forcing = false
		d.Backend.forcing.Store(false)
	}
}

// Await is Pending for a dial whose result always comes later: a UDP
// session's first datagram, judged by the backend's reply (success), an
// ICMP refusal (failure) or no reply within reply_timeout (a failure only
// with count_no_reply, else no evidence either way).
func (p *Pool) Await(d Dial) *Settlement { return &Settlement{d: d} }

// Settlement is a connected dial whose result is still open
// (count_early_reset): the relay settles it once the backend sends a byte
// (success), resets first (failure), or stays silent for
// early_reset_window (success; a reset after that is no failed connect).
type Settlement struct {
	d    Dial
	done atomic.Bool
}

// Settle records the result, in the dial counters and with the breaker at
// once, so the two never disagree. Only the first call counts; a nil
// Settlement (settled at connect) has nothing to settle. The connection's
// count stays until EndRelay.
func (s *Settlement) Settle(o dialer.Outcome) {
	if s == nil || !s.done.CompareAndSwap(false, true) {
		return
	}
	s.d.Backend.countDial(s.d.kind, o)
	s.d.Backend.breaker.Done(s.d.attempt, breakerResult(o))
}

// EndRelay gives back the count of a connection whose relay has ended.
func (p *Pool) EndRelay(b *Backend) {
	b.active.Add(-1)
	b.loadChanged()
}

// ConnectTimeout, ConnectBudget, IdleTimeout and EarlyResetWindow are the
// pool's timing keys, for the loop.
func (p *Pool) ConnectTimeout() time.Duration   { return p.cfg.ConnectTimeout }
func (p *Pool) ConnectBudget() time.Duration    { return p.cfg.ConnectBudget }
func (p *Pool) IdleTimeout() time.Duration      { return p.cfg.IdleTimeout }
func (p *Pool) EarlyResetWindow() time.Duration { return p.cfg.Breaker.EarlyResetWindow }

// ReplyTimeout and CountNoReply are the UDP pool's keys for judging a
// session's first datagram.
func (p *Pool) ReplyTimeout() time.Duration { return p.cfg.ReplyTimeout }
func (p *Pool) CountNoReply() bool          { return p.cfg.Breaker.CountNoReply }

// Protocol is the pool's protocol: "tcp" or "udp" (of the listeners that
// name it).
func (p *Pool) Protocol() string { return p.cfg.Protocol }
