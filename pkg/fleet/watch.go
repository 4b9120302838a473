package fleet

import "github.com/redis/rueidis"

// Watch implements breaker.Notifier: changed is called when the server
// invalidates one of key's cached reads (another instance wrote it), when
// the whole cache is dropped (a reconnect), and after a merge.
func (s *Store) Watch(key string, changed func()) (stop func()) {
	w := &watch{changed: changed}
	s.wmu.Lock()
	set := s.watchers[key]
	if set == nil {
		set = map[*watch]struct{}{}
		s.watchers[key] = set
	}
	set[w] = struct{}{}
	s.wmu.Unlock()
	return func() {
		s.wmu.Lock()
		delete(s.watchers[key], w)
		if len(s.watchers[key]) == 0 {
			delete(s.watchers, key)
		}
		s.wmu.Unlock()
	}
}

// invalidated is rueidis' OnInvalidations, called on its reading
// goroutine: it must be quick, and the watchers' calls never block.
// A nil list means the whole cache was dropped.
func (s *Store) invalidated(msgs []rueidis.RedisMessage) {
	if msgs == nil {
		// The client reconnected or the server flushed: re-read
		// everything, and have Run check at once whether Redis still
		// holds the fleet's data.
		s.notifyAll()
		s.members.markAll()
		s.members.poke()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return
	}
	s.invalidations.Add(uint64(len(msgs)))
	members := false
	defer func() {
		if members {
			s.members.poke()
		}
	}()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for i := range msgs {
		k, err := msgs[i].ToString()
		if err != nil {
			continue
		}
		// Before breakerKey, which would read "P{members}:POOL" as the
		// breaker key "members".
		if pool, index, ok := s.ks.membersKey(k); ok {
			members = true
			if index {
				s.members.markAll()
			} else {
				s.members.markDirty(pool)
			}
			continue
		}
		if key, ok := s.ks.breakerKey(k); ok {
			for w := range s.watchers[key] {
				w.changed()
			}
		}
	}
}

func (s *Store) notifyAll() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, set := range s.watchers {
		for w := range set {
			w.changed()
		}
	}
}
