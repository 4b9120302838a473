package pool

import (
	"testing"

	"github.com/l4lb/l4lb/pkg/health"
)

// The streak that may readmit early must have begun at the open
// generation or later: a passing check that began before the trip is stale
// evidence, like a pre-trip dial.
func TestReadmissionStreakMustBeginAfterTheTrip(t *testing.T) {
	var r readmission
	if r.streakSince(0) {
		t.Fatal("no checks yet, but a streak")
	}
	r.record(0, health.Pass) // began before the trip to generation 1
	r.record(1, health.Pass)
	if r.streakSince(1) {
		t.Fatal("a streak that began before the trip counts as post-trip evidence")
	}
	r.record(1, health.Fail)
	r.record(1, health.Pass)
	r.record(1, health.Inconclusive) // local trouble breaks no streak
	r.record(1, health.Pass)
	if !r.streakSince(1) {
		t.Fatal("a streak begun after the trip is not seen")
	}
	if r.streakSince(2) {
		t.Fatal("a streak begun at generation 1 counts for generation 2")
	}
}
