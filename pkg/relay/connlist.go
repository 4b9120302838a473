package relay

// connList is a loop's connections as an intrusive doubly linked list: a
// connection joins and leaves it in O(1) with no hashing and no memory of
// its own, so a crowd that has gone leaves nothing behind (a map keeps its
// grown buckets).
type connList struct {
	head *conn
	n    int
}

func (l *connList) add(c *conn) {
	c.prev, c.next = nil, l.head
	if l.head != nil {
		l.head.prev = c
	}
	l.head = c
	l.n++
}

func (l *connList) remove(c *conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if l.head == c {
		l.head = c.next
	} else {
		return // not in the list
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	l.n--
}

// each calls f for every connection; f may remove the one it is given.
func (l *connList) each(f func(*conn)) {
	for c := l.head; c != nil; {
		next := c.next
		f(c)
		c = next
	}
}

func (l *connList) len() int { return l.n }
