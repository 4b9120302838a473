package relay

import (
	"context"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// the recovery batch (256 per pass) resets whenever the waiting
// list alternates between pools.
func TestRecoveryBatchInterleavedPools(t *testing.T) {
	pools := buildPools(t, []frontSpec{
		{name: "a", backends: []string{testnet.FreeAddr(t)}},
		{name: "b", backends: []string{testnet.FreeAddr(t)}},
	})
	pa, pb := pools["a"], pools["b"]
	if err := pb.Disable(context.Background(), pb.Backends()[0]); err != nil {
		t.Fatal(err)
	}
	if pa.AllDown() || !pb.AllDown() {
		t.Fatalf("a down %v, b down %v", pa.AllDown(), pb.AllDown())
	}
	var rp recoveryPass
	released := 0
	for i := 0; i < 2000; i++ {
		ca := &conn{pool: pa, dial: &dialState{forced: true}}
		cb := &conn{pool: pb, dial: &dialState{forced: true}}
		if rp.next(ca) {
			released++
		}
		rp.next(cb)
	}
	t.Logf("pool a clients released in one pass: %d (batch %d)", released, recoveryBatch)
	if released > recoveryBatch {
		t.Fatalf("released %d > %d", released, recoveryBatch)
	}
}
