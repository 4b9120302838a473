package fleetsim

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// TestSmallFleet runs the whole schedule on 3 instances × 12 backends and
// checks what must hold whatever the machine's load: every other instance
// read every trip open, each recovery took one probe per cooldown, no
// client was sent to a down backend once its instance knew, every trip
// recovered, and the idle fleet's commands were counted.
func TestSmallFleet(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testnet.Missing(t, "redis-server not installed", "redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A store timeout of 5 s, as pkg/fleet's tests use: a stall past l4lb's
	// 250 ms on a loaded machine would take a Store apart, and the exact
	// counts below are those of a fleet whose Stores stay with Redis.
	res, err := Run(ctx, Options{Instances: 3, Backends: 12, Duration: 4 * time.Second, Trips: 3, Cooldown: 200 * time.Millisecond, Timeout: 5 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if want := res.Trips * (res.Instances - 1); res.ConvergenceSamples != want || res.ConvergenceMissing != 0 {
		t.Errorf("convergence: %d samples and %d missing, want %d and 0", res.ConvergenceSamples, res.ConvergenceMissing, want)
	}
	if res.ProbesPerRecoveryMax != 1 {
		t.Errorf("probes_per_recovery_max %d, want 1", res.ProbesPerRecoveryMax)
	}
	// Each trip: the failed first probe, then the one that closes.
	if res.Recoveries != res.Trips || res.Probes != 2*res.Trips {
		t.Errorf("%d recoveries with %d probes, want %d with %d", res.Recoveries, res.Probes, res.Trips, 2*res.Trips)
	}
	if res.ClientFailures != 0 {
		t.Errorf("client_failures %d, want 0", res.ClientFailures)
	}
	if res.RedisCommandsPerSIdle <= 0 || res.RedisCallsPerSIdle["evalsha"] <= 0 {
		t.Errorf("idle: %.1f commands/s, calls %v: the fleet's health checks were not counted", res.RedisCommandsPerSIdle, res.RedisCallsPerSIdle)
	}
}

func TestOptionsRefuseTooSmall(t *testing.T) {
	for _, o := range []Options{
		{Instances: 1, Backends: 10, Duration: time.Minute},
		{Instances: 2, Backends: 0, Duration: time.Minute},
		{Instances: 2, Backends: 10, Duration: time.Second},
	} {
		if err := o.fill(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestCPUSecondsOfSelf(t *testing.T) {
	a, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		b, err := cpuSeconds(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if b > a {
			return
		}
	}
	t.Error("cpuSeconds of a spinning process never grew in 10 s")
}
