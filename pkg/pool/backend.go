package pool

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/health"
)

// Meter counts the bytes relayed to and from one backend, by every
// connection to it; the event loops add to it once per burst.
type Meter struct {
	ToBackend atomic.Int64
	ToClient  atomic.Int64
}

// DialKind is what a dial was for, as in the metric label "kind".
type DialKind uint8

const (
	DialClient DialKind = iota // for a client connection (retries included)
	DialProbe                  // the breaker's recovery probe
	DialForce                  // an all-down force-try
	DialHealth                 // an active health check
	numDialKinds
)

var dialKindNames = [numDialKinds]string{"client", "probe", "force", "health"}

func (k DialKind) String() string { return dialKindNames[k] }

// DialKinds lists every kind, for exporting counters.
var DialKinds = [...]DialKind{DialClient, DialProbe, DialForce, DialHealth}

// Backend is one backend of a pool with its live state and counters.
type Backend struct {
	Addr string // as configured; the metrics label
	// AddrPort is Addr parsed, for dialers that make their own sockets.
	AddrPort netip.AddrPort
	ID       string // hashing identity
	source   string // config.Backend.Source
	index    int    // in the pool's backends
	// backup: backup = true, a member of the pool's backups (backup.go);
	// slot is the backend's index in its set, as its set's picker knows
	// it.
	backup bool
	slot   int
	// pool is the pool b belongs to, once built; nil for retired.
	pool *Pool
	// rotating: counted in its set's inRotation; guarded by pool.rotMu.
	rotating bool

	weight    atomic.Int32 // for new picks: the configured weight or an operator's
	cfgWeight int
	maxConns  int64                 // max_connections; 0: no cap
	drain     atomic.Pointer[Drain] // an operator's drain; nil: none
	// rt are the operator's drains and weights by scope (shared.go):
	// drain and weight are what they add up to.
	rt scoped

	breaker *breaker.Breaker
	health  *health.Prober // nil when health checks are off

	// The counters live apart: a reload that keeps the backend hands them
	// to its successor, so connections of the old pool count where the new
	// pool looks, and no Prometheus counter goes back to zero.
	*counters

	usable atomic.Bool
	// usableSince is when usability last went false -> true, as read from
	// the pool's clock, so it keeps the monotonic reading and slow start is
	// immune to wall-clock steps; nil: usable from the start (no ramp).
	usableSince atomic.Pointer[time.Time]

	readmit readmission

	// notify tells the pool's picker that this backend's load or
	// usability changed (pick.Notified); set once the picker is built.
	notify atomic.Pointer[func(int)]

	// handedTo is the backend of the next pool that carries this one on
	// after a reload (Pool.HandOver), or retired when the reload dropped
	// it. This one's checks and breaker stop with its pool, so the
	// connections and sessions still holding it ask the successor whether
	// the backend is usable: none stays pinned to a backend that left.
	handedTo atomic.Pointer[Backend]
}

// retired marks a backend a reload dropped (or moved to a new address).
var retired = &Backend{}

// counters are a backend's load and counts, carried across reloads.
type counters struct {
	// active counts connections from the moment a pick chose this backend:
	// dials in flight included, so least-conn, p2c and bounded-load hashing
	// see a burst as it lands and a backend that drops SYNs piles up its
	// stuck dials instead of looking idle. A failed dial gives its count
	// back.
	active atomic.Int64
	Meter  Meter
	// dials counts outcomes per kind: [kind][success, failure].
	dials [numDialKinds][2]atomic.Int64
	// Breaker event counters.
	trips         atomic.Int64
	probeFailures atomic.Int64
	// probeFailed: a recovery probe of this instance failed since the
	// breaker last opened; a close (here or, in a fleet, anywhere) and
	// the next trip clear it.
	probeFailed atomic.Bool
	stale       atomic.Int64
	dropped     atomic.Int64
	// connect times of successful client dials (connecttime.go).
	connect connectTimes
	// forcing: a TCP client's force-try of this backend is in flight
	// (TryBeginForce); here, so a reload that keeps the backend keeps
	// the one slot.
	forcing atomic.Bool
}

// Active is the number of connections on this backend now: dials in flight
// and relays open.
func (b *Backend) Active() int64 { return b.active.Load() }

// Source is where the backend came from: config.BackendFromFile,
// BackendFromDNS or BackendFromAPI.
func (b *Backend) Source() string {
	if b.source == "" {
		return config.BackendFromFile
	}
	return b.source
}

// HealthUp reports whether active checks pass (always true when off).
func (b *Backend) HealthUp() bool { return b.health == nil || b.health.Up() }

// HealthStatus returns the state of b's active checks (the last check's
// result and cause among it); ok is false when health checks are off.
func (b *Backend) HealthStatus() (st health.Status, ok bool) {
	if b.health == nil {
		return health.Status{}, false
	}
	return b.health.Status(), true
}

// Breaker returns the backend's breaker state snapshot.
func (b *Backend) Breaker() breaker.State { return b.breaker.State() }

// Usable reports enabled AND health-up AND breaker closed.
func (b *Backend) Usable() bool {
	if next := b.handedTo.Load(); next != nil {
		return next != retired && next.Usable()
	}
	return b.HealthUp() && b.breaker.Allow()
}

// Dials returns how many dials of kind k succeeded and failed.
func (b *Backend) Dials(k DialKind) (success, failure int64) {
	return b.dials[k][0].Load(), b.dials[k][1].Load()
}

// Trips, ProbeFailures and StaleResults are the breaker's event counts.
func (b *Backend) Trips() int64         { return b.trips.Load() }
func (b *Backend) ProbeFailures() int64 { return b.probeFailures.Load() }
func (b *Backend) StaleResults() int64  { return b.stale.Load() }

// ProbeFailedSinceOpen reports whether a recovery probe this instance made
// failed since the breaker last opened (l4lb_breaker_probe_failed, read
// with the state's Open): unlike ProbeFailures' increase, a new trip
// after a recovery does not inherit the last outage's failures.
func (b *Backend) ProbeFailedSinceOpen() bool { return b.probeFailed.Load() }

// DroppedResults counts breaker transitions that dial results asked for
// and that were never made (breaker.Events.Dropped): in a fleet, the
// results of a backend a reload removed, reported after its breaker
// stopped, or a queue to the Store that was full.
func (b *Backend) DroppedResults() int64 { return b.dropped.Load() }

// countDial records one dial; local trouble is neither success nor failure.
func (b *Backend) countDial(k DialKind, o dialer.Outcome) {
	switch o {
	case dialer.Success:
		b.dials[k][0].Add(1)
	case dialer.Failure:
		b.dials[k][1].Add(1)
	}
}

// refreshUsable recomputes usability and stamps the moment it came back,
// which slow start ramps from.
// It runs on every pick, so it reads the clock and writes only on a change.
func (b *Backend) refreshUsable(now func() time.Time) bool {
	return b.setUsable(b.Usable(), now)
}

// setUsable records usability u as computed by the caller (a breaker event
// computes it from the event's state, never by calling back).
func (b *Backend) setUsable(u bool, now func() time.Time) bool {
	if b.usable.Load() != u && b.usable.CompareAndSwap(!u, u) {
		if u {
			t := now()
			b.usableSince.Store(&t)
		}
		if n := b.notify.Load(); n != nil {
			(*n)(b.slot) // the picker's ordered structures learn of it
		}
		b.rotationChanged()
	}
	return u
}

// usableFrom is usability given a breaker state (enabled, breaker closed)
// and the health checks.
func (b *Backend) usableFrom(st breaker.State) bool {
	return b.HealthUp() && !st.Open && !st.Disabled
}

func breakerResult(o dialer.Outcome) breaker.Result {
	switch o {
	case dialer.Success:
		return breaker.Success
	case dialer.Failure:
		return breaker.Failure
	default:
		return breaker.Local
	}
}
