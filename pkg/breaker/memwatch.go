package breaker

// A MemoryStore is one process's, but during a binary upgrade two
// processes run side by side, each with its own: the old one goes on
// dialing (and tripping) until the new one serves, and drains after. So
// the old process reports every change of its store (OnChange), and the
// new one follows them (Follow) for each key it has not moved itself;
// Watch lets the new process's breakers re-read a key the moment a change
// is followed, as a fleet store's do.

// memWatch is a MemoryStore's subscribers; guarded by the store's mu.
type memWatch struct {
	next  int
	byKey map[string]map[int]func()
	all   map[int]func(key string)
}

var _ Notifier = (*MemoryStore)(nil)

// Watch implements Notifier: changed is called when Follow changes key,
// the one write that does not come from this process's own breakers
// (they re-read what they write themselves). changed runs with the
// store's lock held, so it must not block or call the store.
func (s *MemoryStore) Watch(key string, changed func()) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watch.byKey == nil {
		s.watch.byKey = make(map[string]map[int]func())
	}
	id := s.watch.next
	s.watch.next++
	if s.watch.byKey[key] == nil {
		s.watch.byKey[key] = make(map[int]func())
	}
	s.watch.byKey[key][id] = changed
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watch.byKey[key], id)
		if len(s.watch.byKey[key]) == 0 {
			delete(s.watch.byKey, key)
		}
	}
}

// OnChange calls changed with the key of every state change the store
// makes from now on until stop: a transition (Trip, Close, Reopen that
// took), a disable or enable, a Mirror or Follow that changed something.
// changed runs with the store's lock held, so it must not block or call
// the store: it notes the key, and reads the state later.
func (s *MemoryStore) OnChange(changed func(key string)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watch.all == nil {
		s.watch.all = make(map[int]func(string))
	}
	id := s.watch.next
	s.watch.next++
	s.watch.all[id] = changed
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watch.all, id)
	}
}

// changedLocked tells the OnChange subscribers that key changed, and its
// watchers too when external (a write that did not come from one of this
// process's breakers); s.mu must be held.
func (s *MemoryStore) changedLocked(key string, external bool) {
	for _, f := range s.watch.all {
		f(key)
	}
	if external {
		for _, f := range s.watch.byKey[key] {
			f()
		}
	}
}

// Follow makes st's breaker state (generation, open entry and cooldown,
// not the disable) the state of key, as another process's store reported
// it, if key is still at generation from: the state this process last
// took from that store, so no transition of its own has happened since.
// A key this process moved itself is its own to decide from then on, and
// a generation is never lowered. It reports whether it changed key; the
// watchers of key are told.
func (s *MemoryStore) Follow(key string, from uint64, st State) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// At generation from, both stores hold the same state: only a later
	// generation is news.
	if cur := s.gens[key]; cur != from || st.Generation <= cur {
		return false
	}
	s.gens[key] = st.Generation
	if st.Open {
		s.open[key] = openEntry{gen: st.Generation, cooldown: st.Cooldown, until: s.clock.Now().Add(st.CooldownLeft)}
	} else {
		delete(s.open, key)
	}
	s.changedLocked(key, true)
	return true
}
