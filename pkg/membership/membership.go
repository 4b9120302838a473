// Package membership says which backends each pool has now. Three
// sources name backends: the configuration file, the pool's DNS
// discovery, and operators through the admin API. One rule orders them:
//
//   - The file and discovery say which backends exist. A backend either
//     names is theirs ("source": "file" or "dns"); the file wins over DNS
//     for an address both name.
//   - The API adds backends on top, and removes only the ones it added: a
//     file or DNS backend leaves rotation by drain or disable instead.
//   - An API backend whose address the file or discovery comes to name is
//     hidden while they name it; once the file names it, it is the file's
//     and the API forgets it.
//   - The same holds for identities: a discovered or added backend whose
//     identity (its id, else its address) is already another backend's,
//     or that has a weight out of range (a record from an older state
//     file or another instance), is left out, so what DNS or the fleet
//     says can never make a pool unbuildable.
//
// Backends are one address each: two spellings of one socket address
// ("[::ffff:10.0.0.1]:80" and "10.0.0.1:80") are the same backend. A
// pool's list is the file's backends in file order, then the discovered
// ones by address, then the API's in the order they were added, so a
// change leaves every other backend's place (and its hash placement) as
// it was.
//
// The package keeps the discovered sets and the API's additions; it does
// not resolve names (pkg/discovery) or build pools (pkg/pool): cmd/l4lb
// rebuilds the pools from Pools' answer after every change.
package membership

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"github.com/l4lb/l4lb/pkg/config"
)

// Errors of Add and Remove, wrapped with the pool and the address.
var (
	ErrNoPool       = errors.New("no such pool")
	ErrNoBackend    = errors.New("no such backend")
	ErrExists       = errors.New("already in the pool")
	ErrNotRemovable = errors.New("named by the configuration file or by DNS")
	ErrInvalid      = errors.New("cannot join the pool")
)

// Added is a backend the API added to a pool (the state file's and an
// upgrade's record of it).
type Added struct {
	Addr   string `json:"addr"`
	Weight int    `json:"weight"`
	ID     string `json:"id,omitempty"`
}

// Set is every pool's discovered backends and API additions. It is safe
// for concurrent use.
type Set struct {
	mu  sync.Mutex
	dns map[string][]config.Backend // pool -> discovered, by address
	api map[string][]Added          // pool -> added, in order
	// version counts the changes, so a caller that built pools from
	// Pools can tell a change it has not served yet.
	version uint64
}

// Version grows with every change of what Pools returns.
func (s *Set) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// New returns an empty Set.
func New() *Set {
	return &Set{dns: map[string][]config.Backend{}, api: map[string][]Added{}}
}

// Pools returns cfg with each pool's backends as the sources name them
// now; cfg itself is not changed (pools with nothing discovered or added
// are shared with it).
func (s *Set) Pools(cfg *config.Config) *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := *cfg
	out.Pools = make(map[string]*config.Pool, len(cfg.Pools))
	for name, p := range cfg.Pools {
		out.Pools[name] = s.pool(p)
	}
	return &out
}

// pool is p with its discovered and added backends; under mu.
func (s *Set) pool(p *config.Pool) *config.Pool {
	dns, api := s.dns[p.Name], s.api[p.Name]
	if len(dns) == 0 && len(api) == 0 {
		return p
	}
	q := *p
	q.Backends = slices.Clip(slices.Clone(p.Backends))
	taken := map[netip.AddrPort]bool{}
	ids := map[string]bool{}
	for i := range q.Backends {
		q.Backends[i].Source = config.BackendFromFile
		taken[addrOf(q.Backends[i].Addr)] = true
		ids[q.Backends[i].Identity()], ids[q.Backends[i].Addr] = true, true
	}
	// A backend of a later source whose address or identity an earlier
	// one has is left out: the earlier one is the backend, and the pool
	// stays buildable whatever DNS or another instance says.
	keep := func(b config.Backend) {
		a := addrOf(b.Addr)
		if !taken[a] && !ids[b.Identity()] && !ids[b.Addr] && b.Weight >= 0 && b.Weight <= config.MaxWeight {
			taken[a] = true
			ids[b.Identity()], ids[b.Addr] = true, true
			q.Backends = append(q.Backends, b)
		}
	}
	for _, b := range dns {
		keep(b)
	}
	for _, a := range api {
		keep(a.backend(p))
	}
	return &q
}

func (a Added) backend(p *config.Pool) config.Backend {
	b := config.DefaultBackend()
	b.Addr, b.Weight, b.ID, b.Source, b.Line = a.Addr, a.Weight, a.ID, config.BackendFromAPI, p.Line
	return b
}

// addrOf parses a backend address; config has checked it, so a failure
// leaves the zero AddrPort, which matches nothing real.
func addrOf(s string) netip.AddrPort {
	ap, _ := config.ParseBackendAddr(s)
	return ap
}

// Discovered replaces pool's discovered backends with bs (each with its
// Source "dns") and reports whether that changed them.
func (s *Set) Discovered(pool string, bs []config.Backend) bool {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b config.Backend) int { return addrOf(a.Addr).Compare(addrOf(b.Addr)) })
	for i := range bs {
		bs[i].Source = config.BackendFromDNS
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.dns[pool], bs) {
		return false
	}
	if len(bs) == 0 {
		delete(s.dns, pool)
	} else {
		s.dns[pool] = bs
	}
	s.version++
	return true
}

// Add adds a to pool p (the file's pool) through the API. It refuses an
// address the pool has from any source and an identity another backend
// has; on success undo takes the addition back (the pool could not be
// built with it).
func (s *Set) Add(p *config.Pool, a Added) (undo func(), err error) {
	ap, err := config.ParseBackendAddr(a.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if a.Weight < 0 || a.Weight > config.MaxWeight {
		return nil, fmt.Errorf("%w: weight %d is out of range 0..%d", ErrInvalid, a.Weight, config.MaxWeight)
	}
	a.Addr = ap.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.pool(p)
	for _, b := range have.Backends {
		if addrOf(b.Addr) == ap {
			return nil, fmt.Errorf("pool %q: backend %s: %w (%s)", p.Name, a.Addr, ErrExists, sourceOf(b))
		}
	}
	id := a.ID
	if id == "" {
		id = a.Addr
	}
	for _, b := range have.Backends {
		if b.Identity() == id || b.Addr == id {
			return nil, fmt.Errorf("pool %q: backend %s: %w: identity %q is backend %s's", p.Name, a.Addr, ErrInvalid, id, b.Addr)
		}
	}
	// A hidden entry for the address (the file or DNS named it once) is
	// replaced by this one.
	s.api[p.Name] = slices.DeleteFunc(s.api[p.Name], func(x Added) bool { return addrOf(x.Addr) == ap })
	s.api[p.Name] = append(s.api[p.Name], a)
	s.version++
	return func() { s.drop(p.Name, ap) }, nil
}

// Remove takes the API's backend at addr out of pool p. It refuses a
// backend the file or DNS names (ErrNotRemovable) and one the pool does
// not have. On success it returns the address as the pool spells it, and
// undo puts the backend back.
func (s *Set) Remove(p *config.Pool, addr string) (spelled string, undo func(), err error) {
	ap, err := config.ParseBackendAddr(addr)
	if err != nil {
		return "", nil, fmt.Errorf("pool %q: %w: %s: %v", p.Name, ErrNoBackend, addr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.pool(p).Backends {
		if addrOf(b.Addr) != ap {
			continue
		}
		if b.Source != config.BackendFromAPI {
			return "", nil, fmt.Errorf("pool %q: backend %s: %w (%s): drain or disable it, or take it out there", p.Name, b.Addr, ErrNotRemovable, sourceOf(b))
		}
		list := s.api[p.Name]
		i := slices.IndexFunc(list, func(x Added) bool { return addrOf(x.Addr) == ap })
		gone := list[i]
		s.api[p.Name] = slices.Delete(slices.Clone(list), i, i+1)
		s.version++
		return b.Addr, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.api[p.Name] = slices.Insert(s.api[p.Name], min(i, len(s.api[p.Name])), gone)
			s.version++
		}, nil
	}
	return "", nil, fmt.Errorf("pool %q: %w: %s", p.Name, ErrNoBackend, addr)
}

func (s *Set) drop(pool string, ap netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.api[pool] = slices.DeleteFunc(s.api[pool], func(x Added) bool { return addrOf(x.Addr) == ap })
	if len(s.api[pool]) == 0 {
		delete(s.api, pool)
	}
	s.version++
}

func sourceOf(b config.Backend) string {
	switch b.Source {
	case config.BackendFromDNS:
		return "found in DNS"
	case config.BackendFromAPI:
		return "added through the API"
	}
	return fmt.Sprintf("from the configuration file, line %d", b.Line)
}

// Settle drops what the file cfg makes moot: API additions of pools the
// file no longer has, and of addresses the file now names (the file's
// from now on); and the discovered sets of pools without discovery. undo
// puts back what it dropped (the file could not be served after all).
func (s *Set) Settle(cfg *config.Config) (undo func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	// The maps' slices are never changed in place, so copies of the maps
	// keep what was.
	api, dns := maps.Clone(s.api), maps.Clone(s.dns)
	undo = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.api, s.dns = api, dns
		s.version++
	}
	for name, list := range s.api {
		p, ok := cfg.Pools[name]
		if !ok {
			delete(s.api, name)
			continue
		}
		file := map[netip.AddrPort]bool{}
		for _, b := range p.Backends {
			file[addrOf(b.Addr)] = true
		}
		list = slices.DeleteFunc(slices.Clone(list), func(x Added) bool { return file[addrOf(x.Addr)] })
		if len(list) == 0 {
			delete(s.api, name)
		} else {
			s.api[name] = list
		}
	}
	for name := range s.dns {
		if p, ok := cfg.Pools[name]; !ok || p.Discovery == nil {
			delete(s.dns, name)
		}
	}
	return undo
}

// AddedBackends returns every pool's API additions, for the state file and
// an upgrade.
func (s *Set) AddedBackends() map[string][]Added {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]Added, len(s.api))
	for name, list := range s.api {
		out[name] = slices.Clone(list)
	}
	return out
}

// Restore puts back API additions kept by the state file or passed by an
// upgrade's old process (before the first Pools).
func (s *Set) Restore(added map[string][]Added) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	for name, list := range added {
		if len(list) > 0 {
			s.api[name] = slices.Clone(list)
		}
	}
}

// SetAdded replaces pool's API additions with list (a fleet's record of
// them, written by another instance) and reports whether that changed
// them. Addresses that do not parse are dropped.
func (s *Set) SetAdded(pool string, list []Added) bool {
	var clean []Added
	for _, a := range list {
		if ap, err := config.ParseBackendAddr(a.Addr); err == nil {
			a.Addr = ap.String()
			clean = append(clean, a)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.api[pool], clean) {
		return false
	}
	if len(clean) == 0 {
		delete(s.api, pool)
	} else {
		s.api[pool] = clean
	}
	s.version++
	return true
}

// DiscoveredBackends returns every pool's discovered backends, for an
// upgrade (the new process starts from them, as the old one served).
func (s *Set) DiscoveredBackends() map[string][]config.Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]config.Backend, len(s.dns))
	for name, list := range s.dns {
		out[name] = slices.Clone(list)
	}
	return out
}

// RestoreDiscovered puts back discovered sets an upgrade's old process
// served, so the new one starts with them (its own lookups follow).
func (s *Set) RestoreDiscovered(sets map[string][]config.Backend) {
	for name, bs := range sets {
		s.Discovered(name, bs)
	}
}
