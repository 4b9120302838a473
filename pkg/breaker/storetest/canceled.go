package storetest

import (
	"context"
	"testing"
)

// testCanceledContext: every method called with a context already canceled
// returns an error (context.Canceled or an error wrapping it, for a store
// that wraps) and changes nothing, though the call would have made a
// change on a live context. One subtest per method.
func testCanceledContext(t *testing.T, newEnv func(t *testing.T) *env) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		setup func(e *env, k string)
		call  func(e *env, k string) error
		after func(e *env, k string)
	}{
		{
			"Read", nil,
			func(e *env, k string) error { _, err := e.s.Read(canceled, k); return err },
			func(e *env, k string) { e.checkRead("canceled Read", k, closedAt(0)) },
		},
		{
			"Trip", nil,
			func(e *env, k string) error {
				_, ok, err := e.s.Trip(canceled, k, 0, tripCooldown, tripTTL)
				e.checkOK("canceled Trip", ok, false)
				return err
			},
			func(e *env, k string) { e.checkRead("canceled Trip", k, closedAt(0)) },
		},
		{
			"Close",
			func(e *env, k string) { e.mustTrip(k, 0, tripCooldown, tripTTL) },
			func(e *env, k string) error {
				_, ok, err := e.s.Close(canceled, k, 1)
				e.checkOK("canceled Close", ok, false)
				return err
			},
			func(e *env, k string) { e.checkRead("canceled Close", k, openAt(1, tripCooldown, tripTTL)) },
		},
		{
			"Reopen",
			func(e *env, k string) { e.mustTrip(k, 0, tripCooldown, tripTTL) },
			func(e *env, k string) error {
				_, ok, err := e.s.Reopen(canceled, k, 1, reopenCooldown, reopenTTL)
				e.checkOK("canceled Reopen", ok, false)
				return err
			},
			func(e *env, k string) { e.checkRead("canceled Reopen", k, openAt(1, tripCooldown, tripTTL)) },
		},
		{
			"AcquireProbe", nil,
			func(e *env, k string) error {
				got, err := e.s.AcquireProbe(canceled, k, "a", longTTL)
				if got {
					e.t.Error("canceled AcquireProbe: got the lock")
				}
				return err
			},
			func(e *env, k string) { e.mustAcquire(k, "b", true) },
		},
		{
			"ReleaseProbe",
			func(e *env, k string) { e.mustAcquire(k, "a", true) },
			func(e *env, k string) error { return e.s.ReleaseProbe(canceled, k, "a") },
			func(e *env, k string) { e.mustAcquire(k, "b", false) },
		},
		{
			"Disable", nil,
			func(e *env, k string) error { return e.s.Disable(canceled, k) },
			func(e *env, k string) { e.checkRead("canceled Disable", k, closedAt(0)) },
		},
		{
			"Enable",
			func(e *env, k string) { e.disable(k) },
			func(e *env, k string) error { return e.s.Enable(canceled, k) },
			func(e *env, k string) { e.checkRead("canceled Enable", k, closedAt(0).disabled()) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			k := e.key("k")
			if tc.setup != nil {
				tc.setup(e, k)
			}
			if err := tc.call(e, k); err == nil {
				t.Fatalf("%s on a canceled context: no error", tc.name)
			}
			tc.after(e, k)
		})
	}
}
