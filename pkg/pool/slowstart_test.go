package pool_test

import (
	"context"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Slow start measures how long a backend has been back on the monotonic
// clock: a wall-clock step must neither pin it at the floor nor skip the
// ramp. A time that went through Unix nanoseconds has lost its monotonic
// reading (time.Time.String shows it as "m=").
func TestUsableSinceKeepsTheMonotonicReading(t *testing.T) {
	be := testnet.StartBackend(t, "a", "")
	p := newPool(t, []string{be.Addr}, "algorithm = \"least-conn\"\nslow_start = \"10s\"\n[pool.p.health]\nenabled = false")
	b := p.Backends()[0]
	if err := p.Disable(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := p.Enable(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	since := p.UsableSince(0)
	if since.IsZero() {
		t.Fatal("re-enabled backend has no usable-since time: slow start would not ramp")
	}
	if !strings.Contains(since.String(), " m=") {
		t.Fatalf("usable-since %v has no monotonic reading", since)
	}
}
