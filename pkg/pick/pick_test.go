package pick

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/l4lb/l4lb/pkg/hashring"
)

func TestNewErrors(t *testing.T) {
	good := equalBackends(3)
	for _, tc := range []struct {
		name     string
		backends []Backend
		nilState bool
		cfg      Config
		want     error
	}{
		{name: "unknown algorithm", backends: good, cfg: Config{Algorithm: "fastest"}, want: ErrUnknownAlgorithm},
		{name: "empty algorithm", backends: good, cfg: Config{}, want: ErrUnknownAlgorithm},
		{name: "no backends", cfg: Config{Algorithm: Maglev}, want: ErrNoBackends},
		{name: "nil state", backends: good, nilState: true, cfg: Config{Algorithm: Maglev}, want: ErrNilState},
		{name: "empty id", backends: []Backend{{ID: "", Weight: 1}}, cfg: Config{Algorithm: RoundRobin}, want: ErrEmptyID},
		{name: "duplicate id", backends: []Backend{{ID: "a", Weight: 1}, {ID: "a", Weight: 1}}, cfg: Config{Algorithm: IPHash}, want: ErrDuplicateID},
		{name: "weight too big", backends: []Backend{{ID: "a", Weight: 257}}, cfg: Config{Algorithm: P2C}, want: ErrBadWeight},
		{name: "negative weight", backends: []Backend{{ID: "a", Weight: -1}}, cfg: Config{Algorithm: P2C}, want: ErrBadWeight},
		{name: "bad hash key", backends: good, cfg: Config{Algorithm: IPHash, HashKey: "dest-ip"}, want: ErrBadHashKey},
		{name: "factor one", backends: good, cfg: Config{Algorithm: ConsistentHash, HashBalanceFactor: 1}, want: ErrBadBalanceFactor},
		{name: "factor NaN", backends: good, cfg: Config{Algorithm: ConsistentHash, HashBalanceFactor: math.NaN()}, want: ErrBadBalanceFactor},
		{name: "negative vnodes", backends: good, cfg: Config{Algorithm: ConsistentHash, RingVnodes: -1}, want: ErrBadVnodes},
		{name: "table not prime", backends: good, cfg: Config{Algorithm: Maglev, MaglevTableSize: 65536}, want: ErrBadTableSize},
		{name: "table not prime is a hashring error too", backends: good, cfg: Config{Algorithm: Maglev, MaglevTableSize: 100}, want: hashring.ErrTableSize},
		{name: "negative slow start", backends: good, cfg: Config{Algorithm: LeastConn, SlowStart: -1}, want: ErrBadSlowStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st State = newState(len(tc.backends))
			if tc.nilState {
				st = nil
			}
			if _, err := New(tc.backends, st, sized(tc.cfg)); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestPickContract checks, for every algorithm, what the proxy relies on:
// distinct usable indices, at most n, never weight 0, empty when nothing is
// usable, no allocation, and an Order listing every weighted backend once.
func TestPickContract(t *testing.T) {
	backends := equalBackends(8)
	backends[2].Weight = 0
	backends[5].Weight = 7
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			st := newState(len(backends))
			st.down[1].Store(true)
			st.down[6].Store(true)
			p := mustNew(t, backends, st, Config{Algorithm: alg, HashBalanceFactor: balanceFor(alg)})
			for i := range 2000 {
				n := i%5 + 1
				got := p.Pick(client(i), n, nil)
				if len(got) == 0 || len(got) > n {
					t.Fatalf("Pick(n=%d) = %v", n, got)
				}
				for k, b := range got {
					if b == 2 || b == 1 || b == 6 {
						t.Fatalf("Pick = %v includes weight-0 or unusable backend %d", got, b)
					}
					if slices.Contains(got[:k], b) {
						t.Fatalf("Pick = %v repeats %d", got, b)
					}
				}
				if n >= 5 && len(got) != 5 {
					t.Fatalf("Pick(n=%d) = %v, want all 5 usable backends", n, got)
				}
			}
			if got := p.Pick(client(1), 0, nil); len(got) != 0 {
				t.Errorf("Pick(n=0) = %v", got)
			}
			prefix := []int{42}
			if got := p.Pick(client(1), 2, prefix); got[0] != 42 || len(got) != 3 {
				t.Errorf("Pick must append after dst's contents, got %v", got)
			}
			order := p.Order(client(3), nil)
			slices.Sort(order)
			if want := []int{0, 1, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
				t.Errorf("Order (sorted) = %v, want %v", order, want)
			}
			dst := make([]int, 0, 3)
			if allocs := testing.AllocsPerRun(200, func() { dst = p.Pick(client(5), 3, dst[:0]) }); allocs != 0 {
				t.Errorf("Pick allocates %v times", allocs)
			}
			for i := range st.down {
				st.down[i].Store(true)
			}
			if got := p.Pick(client(1), 3, nil); len(got) != 0 {
				t.Errorf("all unusable: Pick = %v, want none", got)
			}
			if got := p.Order(client(1), nil); len(got) != 7 {
				t.Errorf("all unusable: Order = %v, want the 7 weighted backends", got)
			}
		})
	}
}

func balanceFor(alg string) float64 {
	if alg == ConsistentHash {
		return 1.25
	}
	return 0
}

func TestAllWeightsZero(t *testing.T) {
	backends := []Backend{{ID: "a"}, {ID: "b"}}
	for _, alg := range Algorithms {
		p := mustNew(t, backends, newState(2), Config{Algorithm: alg})
		if got := p.Pick(client(1), 3, nil); len(got) != 0 {
			t.Errorf("%s: Pick = %v", alg, got)
		}
		if got := p.Order(client(1), nil); len(got) != 0 {
			t.Errorf("%s: Order = %v", alg, got)
		}
	}
}

var hashingAlgorithms = []string{IPHash, ConsistentHash, Maglev}

func TestHashKey(t *testing.T) {
	v4 := netip.MustParseAddrPort("192.0.2.7:4000")
	mapped := netip.MustParseAddrPort("[::ffff:192.0.2.7]:4000")
	for _, alg := range hashingAlgorithms {
		t.Run(alg, func(t *testing.T) {
			ip := mustNew(t, equalBackends(50), newState(50), Config{Algorithm: alg})
			ipPort := mustNew(t, equalBackends(50), newState(50), Config{Algorithm: alg, HashKey: HashKeySourceIPPort})
			for _, p := range []Picker{ip, ipPort} {
				if a, b := p.Pick(v4, 3, nil), p.Pick(mapped, 3, nil); !slices.Equal(a, b) {
					t.Errorf("IPv4 %v and IPv4-mapped %v differ", a, b)
				}
			}
			samePort, otherPort := 0, 0
			for port := range uint16(200) {
				c := netip.AddrPortFrom(v4.Addr(), 1000+port)
				if ip.Pick(c, 1, nil)[0] == ip.Pick(v4, 1, nil)[0] {
					samePort++
				}
				if ipPort.Pick(c, 1, nil)[0] != ipPort.Pick(v4, 1, nil)[0] {
					otherPort++
				}
			}
			if samePort != 200 {
				t.Errorf("source-ip: %d of 200 ports kept the backend, want all", samePort)
			}
			if otherPort < 100 {
				t.Errorf("source-ip-port: only %d of 200 ports changed backend", otherPort)
			}
		})
	}
}

func TestIPHashByHand(t *testing.T) {
	// The injected hash returns the address's last byte, so client x.x.x.k
	// owns sorted[k mod 4]; its first rehash is mix(k, 1).
	lastByte := func(b []byte) uint64 { return uint64(b[15]) }
	backends := []Backend{{ID: "d", Weight: 1}, {ID: "b", Weight: 1}, {ID: "a", Weight: 1}, {ID: "c", Weight: 1}}
	st := newState(4)
	p := mustNew(t, backends, st, Config{Algorithm: IPHash, Hash: lastByte})
	for k := range 8 {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(k)}), 1)
		want := []string{"a", "b", "c", "d"}[k%4]
		if got := backends[p.Pick(c, 1, nil)[0]].ID; got != want {
			t.Errorf("client %d: %s, want %s", k, got, want)
		}
		// The fallback is the first rehash that lands elsewhere.
		var fallback string
		for r := 1; ; r++ {
			if f := []string{"a", "b", "c", "d"}[mix(uint64(k), r)%4]; f != want {
				fallback = f
				break
			}
		}
		if got := backends[p.Pick(c, 2, nil)[1]].ID; got != fallback {
			t.Errorf("client %d: fallback %s, want %s", k, got, fallback)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	backends := equalBackends(5)
	backends[3].Weight = 0
	backends[1].Weight = 9 // ignored
	st := newState(5)
	st.down[4].Store(true)
	p := mustNew(t, backends, st, Config{Algorithm: RoundRobin})
	var got []int
	for range 8 {
		got = p.Pick(client(0), 1, got)
	}
	// Turns 0 1 2 3 4 0 1 2: 3 has weight 0 and 4 is down, so the next
	// usable one takes their turn.
	if want := []int{0, 1, 2, 0, 0, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("sequence %v, want %v", got, want)
	}
	// Turn 8 is 3's: it and 4 are passed over, then index order.
	if got := p.Pick(client(0), 3, nil); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("fallbacks %v, want [0 1 2]", got)
	}
	if got := p.Pick(client(0), 3, nil); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("turn 9: %v, want [0 1 2]", got)
	}
	if got := p.Pick(client(0), 3, nil); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("turn 10: %v, want [0 1 2]", got)
	}
	if got := p.Pick(client(0), 3, nil); !slices.Equal(got, []int{1, 2, 0}) {
		t.Errorf("turn 11: %v, want [1 2 0]", got)
	}
}

func TestRandomUniform(t *testing.T) {
	backends := equalBackends(6)
	backends[0].Weight = 50 // ignored
	st := newState(6)
	st.down[3].Store(true)
	r := rand.New(rand.NewPCG(1, 2))
	p := mustNew(t, backends, st, Config{Algorithm: Random, Rand: r.Uint64})
	counts := make([]int, 6)
	const picks = 100_000
	for range picks {
		counts[p.Pick(client(0), 1, nil)[0]]++
	}
	for i, c := range counts {
		want := picks / 5
		if i == 3 {
			want = 0
		}
		if math.Abs(float64(c-want)) > 0.03*picks/5 {
			t.Errorf("backend %d: %d picks, want %d ± 3%%", i, c, want)
		}
	}
}

// The hashing structures have no default size here: the algorithm that
// builds one refuses a Config without it, and the others need none.
func TestHashingSizesRequired(t *testing.T) {
	good := equalBackends(3)
	if _, err := New(good, newState(3), Config{Algorithm: ConsistentHash}); !errors.Is(err, ErrBadVnodes) {
		t.Errorf("consistent-hash without ring_vnodes: err = %v, want %v", err, ErrBadVnodes)
	}
	if _, err := New(good, newState(3), Config{Algorithm: Maglev}); !errors.Is(err, ErrBadTableSize) {
		t.Errorf("maglev without a table size: err = %v, want %v", err, ErrBadTableSize)
	}
	for _, alg := range Algorithms {
		if alg == ConsistentHash || alg == Maglev {
			continue
		}
		if _, err := New(good, newState(3), Config{Algorithm: alg}); err != nil {
			t.Errorf("%s without hashing sizes: %v", alg, err)
		}
	}
}
