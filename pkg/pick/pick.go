package pick

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"
)

// Backend is one member of a pool as the picker sees it.
type Backend struct {
	ID     string // identity hashed by consistent algorithms (configured id, or addr)
	Weight int    // 0..MaxWeight; 0 = never chosen for new connections
}

// MaxWeight is the largest weight a backend may have.
const MaxWeight = 256

// State is the pool's live view of its backends, indexed like the slice
// given to New. Every method must be safe for concurrent use and cheap
// (atomic loads): pickers call them on every pick.
type State interface {
	Usable(i int) bool           // enabled AND health-up AND breaker-closed
	Active(i int) int64          // relayed connections open now on backend i
	UsableSince(i int) time.Time // when i last became usable; zero Time = from the start (no slow-start ramp)
}

// Config selects and tunes an algorithm. Its zero value (apart from
// Algorithm) gives the documented defaults, but for the sizes of the
// hashing structures, which the algorithm that builds one needs set (the
// defaults of the file's keys are pkg/config's).
type Config struct {
	Algorithm         string              // one of Algorithms, as in the config file
	HashKey           string              // "source-ip" (default when "") | "source-ip-port"
	SlowStart         time.Duration       // ramp for returning backends (weighted-round-robin, least-conn, p2c); 0 = off
	HashBalanceFactor float64             // consistent-hash bounded load; 0 = off, else > 1
	RingVnodes        int                 // consistent-hash points per unit of weight; required by consistent-hash
	MaglevTableSize   int                 // a prime; required by maglev
	Hash              func([]byte) uint64 // nil = xxhash.Sum64
	Now               func() time.Time    // nil = time.Now (slow start)
	Rand              func() uint64       // nil = math/rand/v2 (random, p2c); must be concurrency-safe
	// Notified promises that the caller calls Changed on the picker (when
	// it implements Notified) for every change of a backend's Active count
	// and whenever its usability may have changed; the picker then polls
	// one backend per pick instead of up to pollBudget (see Notified).
	Notified bool
}

// Picker chooses backends for client connections.
type Picker interface {
	// Pick appends to dst up to n distinct usable backend indices for a
	// client at src, best first, and returns it. It does not allocate when
	// cap(dst) >= len(dst)+n.
	Pick(src netip.AddrPort, n int, dst []int) []int
	// Order appends every backend with weight > 0, usable or not, in this
	// client's preference order (for hashing: owner first then fallbacks;
	// for others: the algorithm's own order). The pool uses it to choose
	// which single backend to force-try when none is usable.
	Order(src netip.AddrPort, dst []int) []int
}

// Algorithm names, as written in the config file.
const (
	RoundRobin         = "round-robin"
	WeightedRoundRobin = "weighted-round-robin"
	LeastConn          = "least-conn"
	Random             = "random"
	P2C                = "p2c"
	IPHash             = "ip-hash"
	ConsistentHash     = "consistent-hash"
	Maglev             = "maglev"
)

// Algorithms lists every algorithm New accepts.
var Algorithms = []string{RoundRobin, WeightedRoundRobin, LeastConn, Random, P2C, IPHash, ConsistentHash, Maglev}

// Hash key names, as written in the config file.
const (
	HashKeySourceIP     = "source-ip"
	HashKeySourceIPPort = "source-ip-port"
	// HashKeySNI hashes the TLS server name: the caller gives as src an
	// address derived from the name (pool.Pool.KeyFor), hashed as
	// source-ip hashes an address, so one name reaches one backend.
	HashKeySNI = "sni"
)

// Errors returned by New, wrapped with the offending value.
var (
	ErrUnknownAlgorithm = errors.New("pick: unknown algorithm")
	ErrNoBackends       = errors.New("pick: no backends")
	ErrEmptyID          = errors.New("pick: empty backend id")
	ErrDuplicateID      = errors.New("pick: duplicate backend id")
	ErrBadWeight        = errors.New("pick: weight out of range")
	ErrBadHashKey       = errors.New("pick: unknown hash key")
	ErrBadBalanceFactor = errors.New("pick: hash balance factor must be 0 or > 1")
	ErrBadVnodes        = errors.New("pick: ring vnodes must be at least 1")
	ErrBadTableSize     = errors.New("pick: bad maglev table size")
	ErrBadSlowStart     = errors.New("pick: slow start must be >= 0")
	ErrNilState         = errors.New("pick: nil state")
)

// New returns the picker for cfg.Algorithm over backends. st reports the
// backends' usability and load by their index in backends.
func New(backends []Backend, st State, cfg Config) (Picker, error) {
	if err := validate(backends, st, cfg); err != nil {
		return nil, err
	}
	c := common{
		st:        st,
		weights:   make([]int32, len(backends)),
		slowStart: cfg.SlowStart,
		now:       cfg.Now,
		rand:      cfg.Rand,
		key:       keyer{withPort: cfg.HashKey == HashKeySourceIPPort, hash: cfg.Hash},
	}
	for i, b := range backends {
		c.weights[i] = int32(b.Weight)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rand == nil {
		c.rand = rand.Uint64
	}
	switch cfg.Algorithm {
	case RoundRobin:
		return &roundRobin{common: c}, nil
	case WeightedRoundRobin:
		return newWeightedRoundRobin(c, cfg.Notified), nil
	case LeastConn:
		return newLeastConn(c, cfg.Notified), nil
	case Random:
		return &random{common: c}, nil
	case P2C:
		return &p2c{common: c}, nil
	case IPHash:
		return newIPHash(c, backends, cfg.Notified), nil
	case ConsistentHash:
		return newConsistentHash(c, backends, cfg)
	case Maglev:
		return newMaglev(c, backends, cfg)
	}
	panic("unreachable: validate checked the algorithm")
}

func validate(backends []Backend, st State, cfg Config) error {
	known := false
	for _, a := range Algorithms {
		known = known || a == cfg.Algorithm
	}
	if !known {
		return fmt.Errorf("%q: %w", cfg.Algorithm, ErrUnknownAlgorithm)
	}
	if len(backends) == 0 {
		return ErrNoBackends
	}
	if st == nil {
		return ErrNilState
	}
	seen := make(map[string]bool, len(backends))
	for i, b := range backends {
		switch {
		case b.ID == "":
			return fmt.Errorf("backend %d: %w", i, ErrEmptyID)
		case seen[b.ID]:
			return fmt.Errorf("backend %d %q: %w", i, b.ID, ErrDuplicateID)
		case b.Weight < 0 || b.Weight > MaxWeight:
			return fmt.Errorf("backend %q weight %d not in [0, %d]: %w", b.ID, b.Weight, MaxWeight, ErrBadWeight)
		}
		seen[b.ID] = true
	}
	switch cfg.HashKey {
	case "", HashKeySourceIP, HashKeySourceIPPort, HashKeySNI:
	default:
		return fmt.Errorf("%q: %w", cfg.HashKey, ErrBadHashKey)
	}
	if f := cfg.HashBalanceFactor; f != 0 && !(f > 1 && !math.IsInf(f, 1)) {
		return fmt.Errorf("%v: %w", f, ErrBadBalanceFactor)
	}
	if cfg.RingVnodes < 0 || cfg.RingVnodes == 0 && cfg.Algorithm == ConsistentHash {
		return fmt.Errorf("%d: %w", cfg.RingVnodes, ErrBadVnodes)
	}
	if cfg.MaglevTableSize < 0 || cfg.MaglevTableSize == 0 && cfg.Algorithm == Maglev {
		return fmt.Errorf("%d: %w", cfg.MaglevTableSize, ErrBadTableSize)
	}
	if cfg.SlowStart < 0 {
		return fmt.Errorf("%v: %w", cfg.SlowStart, ErrBadSlowStart)
	}
	return nil
}
