package udpsession

// sessionList is a UDP socket's sessions ordered by last activity, the
// longest idle at the head: activity moves a session to the back in O(1),
// so the head is always the next to time out and the one evicted at
// max_sessions, with one timer for the whole list.
type sessionList struct {
	head, tail *session
	n          int
	// finger is where the last session inserted by its activity went
	// (insertByActivity), while it is in the list.
	finger *session
}

func (l *sessionList) pushBack(s *session) { l.insertAfter(l.tail, s) }

// insertAfter links s in right after at (nil: at the head).
func (l *sessionList) insertAfter(at, s *session) {
	s.prev = at
	if at != nil {
		s.next, at.next = at.next, s
	} else {
		s.next, l.head = l.head, s
	}
	if s.next != nil {
		s.next.prev = s
	} else {
		l.tail = s
	}
	l.n++
}

// insertByActivity puts s, idle for a while already (a session handed
// over by another process), where its last activity places it. Handed-over
// sessions come in the order the other process had them, longest idle
// first, so the search starts where the previous one went: each costs a
// step or two, not a walk past the sessions of this process.
func (l *sessionList) insertByActivity(s *session) {
	at := l.finger // s goes right after at (nil: at the head)
	if at == nil {
		at = l.tail
	}
	for at != nil && at.lastActive > s.lastActive {
		at = at.prev
	}
	for {
		next := l.head
		if at != nil {
			next = at.next
		}
		if next == nil || next.lastActive >= s.lastActive {
			break // before its equals: a turn gives many sessions one time
		}
		at = next
	}
	l.insertAfter(at, s)
	l.finger = s
}

func (l *sessionList) remove(s *session) {
	if s.prev == nil && l.head != s {
		return // not in the list
	}
	if l.finger == s {
		l.finger = s.prev
	}
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = nil, nil
	l.n--
}

func (l *sessionList) moveToBack(s *session) {
	if l.tail == s {
		return
	}
	l.remove(s)
	l.pushBack(s)
}

func (l *sessionList) len() int { return l.n }
