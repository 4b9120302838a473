// Package breaker is l4lb's connect-failure circuit breaker: it decides, per
// backend, whether client dials may go out, and it brings a tripped backend
// back only on evidence gathered after the trip.
//
// The rules are docs/breaker.md, each with the tests that check it. In
// short:
//
//   - Closed: failed dials are counted in a sliding window; successes do not
//     clear it. The Config.Failures-th failure in the window trips the
//     breaker (optionally only when MinRatio of at least MinVolume dials
//     failed).
//   - Every backend has a generation that only goes up and is bumped by every
//     transition (trip, close, re-open). Each dial captures it before its
//     connect (Begin); a result from an older generation is stale and ignored.
//   - Open: after the cooldown the breaker probes the backend itself, one
//     probe at a time fleet-wide (Store probe lock). Successes of probe or
//     force-try dials of the current Open generation close it, through a
//     compare-and-delete in the Store; a failed probe re-opens it with a
//     doubled cooldown and raises the alert (WARN log + Events.ProbeFailure).
//   - Manual disable lives in the Store apart from breaker entries and is
//     never undone by anything automatic.
//   - All down: ChooseForceTry picks the one backend a client may force-try.
//
// # Using it
//
//	store := breaker.NewMemoryStore(nil)           // one per process (or Redis, later)
//	b, err := breaker.New("web/10.0.0.1:80", cfg, store, breaker.Options{
//	        Logger: log, Events: ev,
//	        Probe:  func(ctx context.Context) breaker.Result { ... one recovery dial ... },
//	})
//	go b.Run(ctx)                                  // snapshot refresh + recovery probes
//
//	if b.Allow() {                                 // hot path, lock-free
//	        a := b.Begin(breaker.KindClient)       // BEFORE the connect syscall
//	        conn, err := dial()
//	        b.Done(a, classify(err))               // Success, Failure or Local
//	}
//
// State() is the snapshot for the admin API and metrics (open, generation,
// cooldown left, disabled). Disable and Enable are the admin switches; they
// write the Store and refresh the snapshot at once.
//
// All-down: collect State() of the candidates in the picker's order, call
// ChooseForceTry, then Begin(KindForce)/Done on the chosen backend only.
//
// The key passed to New names the backend in the Store, so fleet instances
// sharing a Store must build it the same way (the wiring uses "pool/addr").
// Events receive that key.
//
// # What is compared with what
//
// No decision compares clocks of two machines (rule 7): generations order
// transitions and dials, and a cooldown is a duration held by the Store and
// read back as time remaining. The local clock (Options.Clock) is used only for
// the failure window and for ageing the local snapshot.
package breaker
