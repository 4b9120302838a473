package udpsession

// sessionList is a UDP socket's sessions ordered by last activity, the
// longest idle at the head: activity moves a session to the back in O(1),
// so the head is always the next to time out and the one evicted at
// max_sessions, with one timer for the whole list.
type sessionList struct {
	head, tail *session
	n          int
}

func (l *sessionList) pushBack(s *session) {
	s.prev, s.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = s
	} else {
		l.head = s
	}
	l.tail = s
	l.n++
}

func (l *sessionList) remove(s *session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if l.head == s {
		l.head = s.next
	} else {
		return // not in the list
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
