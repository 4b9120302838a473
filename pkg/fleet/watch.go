package fleet

import "github.com/redis/rueidis"

// Watch implements breaker.Notifier: changed is called when the server
// says one of key's state fields was written (broadcast tracking tells
// every write to the prefix, another instance's or this one's), when the
// whole cache is dropped (a reconnect or a flush), and after a merge. A
// watched key's open state is also remembered between reads (openmemo.go).
func (s *Store) Watch(key string, changed func()) (stop func()) {
	w := &watch{changed: changed}
	s.wmu.Lock()
	set := s.watchers[key]
	if set == nil {
		set = map[*watch]struct{}{}
		s.watchers[key] = set
		s.memos[key] = &openMemo{}
	}
	set[w] = struct{}{}
	s.wmu.Unlock()
	return func() {
		s.wmu.Lock()
		delete(s.watchers[key], w)
		if len(s.watchers[key]) == 0 {
			delete(s.watchers, key)
			delete(s.memos, key)
		}
		s.wmu.Unlock()
	}
}

// invalidated is rueidis' OnInvalidations, called on its reading
// goroutine: it must be quick, and the watchers' calls never block.
// A nil list means the whole cache was dropped.
func (s *Store) invalidated(msgs []rueidis.RedisMessage) {
	if msgs == nil {
		// The client reconnected or the server flushed: the cache is
		// empty and tracking starts over on the new connection, so
		// every key is read again, once, and Run checks at once whether
		// Redis still holds the fleet's data.
		s.forgetAll()
		s.notifyAll()
		s.members.markAll()
		s.members.poke()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return
	}
	members := false
	var calls []func()
	defer func() {
		call(calls) // after wmu is let go (call's comment)
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
			s.invalidations.Add(1)
			members = true
			if index {
				s.members.markAll()
			} else {
				s.members.markDirty(pool)
			}
			continue
		}
		// A probe lock's comings and goings are no change of state:
		// telling the breakers would have every instance re-read at
		// every probe. Nor is a vote below the quorum: the one that
		// reaches it writes the open entry, which is.
		if key, field, ok := s.ks.breakerField(k); ok && field != fieldProbe && field != fieldVotes {
			if len(s.watchers[key]) > 0 {
				s.invalidations.Add(1) // a key this instance holds
			}
			s.forgetLocked(key)
			for w := range s.watchers[key] {
				calls = append(calls, w.changed)
			}
		}
	}
}

func (s *Store) notifyAll() {
	s.wmu.Lock()
	var calls []func()
	for _, set := range s.watchers {
		for w := range set {
			calls = append(calls, w.changed)
		}
	}
	s.wmu.Unlock()
	call(calls)
}

// call runs watchers' callbacks, collected under wmu, after it is let go:
// a callback may take a lock of its own under which Watch or its stop is
// called (the drains' follower does), and called under wmu that order
// would be the other way round.
func call(calls []func()) {
	for _, f := range calls {
		f()
	}
}
