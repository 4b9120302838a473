package fleet

import (
	"context"
	"testing"
	"time"
)

// A's probe 1 ends apart (its release is owed), and A, still apart,
// starts probe 2 of the same backend under the same owner token. At the
// rejoin Redis still holds probe 1's lock, under that token: probe 2
// must keep it, and the owed release must not drop it, or B could probe
// beside probe 2. (A fresh-eyes review found the release made after the
// merge dropping it.)
func TestProbeLockOfAProbeBegunApartOutlivesTheOwedRelease(t *testing.T) {
	_, p, a, b := apartStores(t, Options{})
	const key = "web/10.0.8.9:80"
	ctx := context.Background()
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got {
		t.Fatalf("A takes the probe lock in redis: %v %v", got, err)
	}
	cutOff(t, p, a, key)
	if err := a.ReleaseProbe(ctx, key, "A"); err != nil { // probe 1 ends apart
		t.Fatalf("A releases apart: %v", err)
	}
	if got, err := a.AcquireProbe(ctx, key, "A", time.Hour); err != nil || !got { // probe 2 starts apart
		t.Fatalf("A takes the local lock for probe 2: %v %v", got, err)
	}
	p.Heal()
	rejoined(t, a, "A rejoins")
	if got, err := b.AcquireProbe(ctx, key, "B", time.Hour); err != nil || got {
		t.Fatalf("B takes the probe lock (%v %v) while A's probe 2, started apart, still runs", got, err)
	}
}
