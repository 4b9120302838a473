package pick

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// fakeState is a State whose usability, load and since-times the test sets.
type fakeState struct {
	down   []atomic.Bool
	active []atomic.Int64
	since  []atomic.Int64 // UnixNano; 0 = zero Time
}

func newState(n int) *fakeState {
	return &fakeState{down: make([]atomic.Bool, n), active: make([]atomic.Int64, n), since: make([]atomic.Int64, n)}
}

func (s *fakeState) Usable(i int) bool  { return !s.down[i].Load() }
func (s *fakeState) Active(i int) int64 { return s.active[i].Load() }
func (s *fakeState) UsableSince(i int) time.Time {
	if ns := s.since[i].Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func equalBackends(n int) []Backend {
	b := make([]Backend, n)
	for i := range b {
		b[i] = Backend{ID: fmt.Sprintf("10.1.%d.%d:9000", i/250, i%250+1), Weight: 1}
	}
	return b
}

// client returns the i-th test client address, spread over IPv4 space.
func client(i int) netip.AddrPort {
	u := uint32(i)*2654435761 + 0x0a000000
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}), uint16(1024+i%60000))
}

// mustNew builds a picker, with the hashing structures at l4lb's default
// sizes (pkg/config's) unless cfg sets them.
func mustNew(t interface{ Fatal(...any) }, backends []Backend, st State, cfg Config) Picker {
	p, err := New(backends, st, sized(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sized is cfg with RingVnodes and MaglevTableSize at l4lb's defaults
// where it leaves them 0.
func sized(cfg Config) Config {
	d := config.DefaultPool("")
	if cfg.RingVnodes == 0 {
		cfg.RingVnodes = d.RingVnodes
	}
	if cfg.MaglevTableSize == 0 {
		cfg.MaglevTableSize = d.MaglevTableSize
	}
	return cfg
}
