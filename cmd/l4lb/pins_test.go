package main

import (
	"slices"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/hashring"
	"github.com/l4lb/l4lb/pkg/pick"
)

// pkg/config may not import the packages it configures, nor they it
// (internal/arch), so names and bounds are written on both sides (the
// defaults only in pkg/config, which the wiring passes on). This package
// imports both: these tests fail when one side changes alone.

func TestAlgorithmNamesAgree(t *testing.T) {
	if !sameSet(config.Algorithms(), pick.Algorithms) {
		t.Fatalf("config accepts algorithms %v, pick builds %v", config.Algorithms(), pick.Algorithms)
	}
	pairs := map[string]string{
		config.AlgorithmRoundRobin:         pick.RoundRobin,
		config.AlgorithmWeightedRoundRobin: pick.WeightedRoundRobin,
		config.AlgorithmLeastConn:          pick.LeastConn,
		config.AlgorithmRandom:             pick.Random,
		config.AlgorithmP2C:                pick.P2C,
		config.AlgorithmIPHash:             pick.IPHash,
		config.AlgorithmConsistentHash:     pick.ConsistentHash,
		config.AlgorithmMaglev:             pick.Maglev,
	}
	for c, p := range pairs {
		if c != p {
			t.Errorf("config calls an algorithm %q, pick %q", c, p)
		}
	}
	backends := []pick.Backend{{ID: "a", Weight: 1}, {ID: "b", Weight: config.MaxWeight}}
	p := config.DefaultPool("p")
	for _, name := range config.Algorithms() {
		if _, err := pick.New(backends, noState{}, pick.Config{Algorithm: name, RingVnodes: p.RingVnodes, MaglevTableSize: p.MaglevTableSize}); err != nil {
			t.Errorf("config accepts algorithm %q, pick.New refuses it: %v", name, err)
		}
	}
	if _, err := pick.New(backends, noState{}, pick.Config{Algorithm: "fastest"}); err == nil {
		t.Error("pick.New accepts any algorithm name: this test proves nothing")
	}
}

func TestHashKeysAgree(t *testing.T) {
	if !sameSet(config.HashKeys(), []string{pick.HashKeySourceIP, pick.HashKeySourceIPPort, pick.HashKeySNI}) ||
		config.HashKeySourceIP != pick.HashKeySourceIP || config.HashKeySourceIPPort != pick.HashKeySourceIPPort || config.HashKeySNI != pick.HashKeySNI {
		t.Fatalf("config hash keys %v, pick %q %q %q", config.HashKeys(), pick.HashKeySourceIP, pick.HashKeySourceIPPort, pick.HashKeySNI)
	}
	backends := []pick.Backend{{ID: "a", Weight: 1}}
	for _, key := range config.HashKeys() {
		if _, err := pick.New(backends, noState{}, pick.Config{Algorithm: pick.IPHash, HashKey: key}); err != nil {
			t.Errorf("config accepts hash_key %q, pick.New refuses it: %v", key, err)
		}
	}
}

func TestBoundsAgree(t *testing.T) {
	if config.MaxWeight != pick.MaxWeight {
		t.Errorf("config.MaxWeight %d, pick.MaxWeight %d", config.MaxWeight, pick.MaxWeight)
	}
	if config.MaxRingPoints != hashring.MaxRingPoints {
		t.Errorf("config.MaxRingPoints %d, hashring.MaxRingPoints %d", config.MaxRingPoints, hashring.MaxRingPoints)
	}
	if config.MaxMaglevTableSize > hashring.MaxMaglevSize {
		t.Errorf("config accepts maglev_table_size up to %d, hashring only %d", config.MaxMaglevTableSize, hashring.MaxMaglevSize)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// noState is a pool where every backend is usable and idle.
type noState struct{}

func (noState) Usable(int) bool           { return true }
func (noState) Active(int) int64          { return 0 }
func (noState) UsableSince(int) time.Time { return time.Time{} }
