package fleet

import (
	"time"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// An open breaker's state cannot come from the client-side cache: its
// cooldown left is the cooldown key's TTL in Redis, which no cache keeps
// current. It need not be read again every snapshot refresh either: once
// read, the cooldown runs down on the local clock as it does on Redis's,
// and anything else that changes the state (a probe's close or re-open,
// a disable, a merge, another instance's trip after a close) is a write
// to one of the key's fields, which the server tells every instance of.
// So Store keeps the last answer about each watched open breaker, aged by
// the local clock, until the key is invalidated, this instance writes it,
// the connection or the Store's standing with Redis changes, or the
// cooldown runs out: the read that decides a probe is always Redis's.
// An open backend then costs each instance a read per change, not two a
// second for as long as it stays open.

// openMemo is one watched key's memo, under Store.wmu.
type openMemo struct {
	// ver counts what made the memo void (invalidations of the key, own
	// writes, reconnects); a read's answer is kept only if ver did not
	// move while it was in flight, so an invalidation that overtook the
	// answer on its way to the caller is never undone.
	ver uint64
	st  breaker.State
	at  time.Time // when st was answered; zero: no memo
}

// recall answers key's memo, aged, if it holds one whose cooldown has not
// run out; ver is what a read begun now must find to remember its answer.
func (s *Store) recall(key string) (st breaker.State, ver uint64, ok bool) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	m := s.memos[key]
	if m == nil {
		return breaker.State{}, 0, false
	}
	if m.at.IsZero() || !s.up.Load() {
		return breaker.State{}, m.ver, false
	}
	st = m.st
	st.CooldownLeft -= time.Since(m.at)
	if st.CooldownLeft <= 0 {
		m.at = time.Time{}
		return breaker.State{}, m.ver, false
	}
	return st, m.ver, true
}

// remember keeps st, Redis's answer about an open key to a read begun at
// ver, unless the key is unwatched or its memo was voided meanwhile.
func (s *Store) remember(key string, ver uint64, st breaker.State) {
	if !st.Open || st.CooldownLeft <= 0 {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if m := s.memos[key]; m != nil && m.ver == ver {
		m.st, m.at = st, time.Now()
	}
}

// forget voids key's memo: this instance wrote the key, or is about to
// probe it (the read under the probe lock must be Redis's).
func (s *Store) forget(key string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.forgetLocked(key)
}

func (s *Store) forgetLocked(key string) {
	if m := s.memos[key]; m != nil {
		m.ver++
		m.at = time.Time{}
	}
}

// forgetAll voids every memo: the connection was lost (its invalidations
// with it), the server flushed, or the Store left or rejoined Redis.
func (s *Store) forgetAll() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for key := range s.memos {
		s.forgetLocked(key)
	}
}
