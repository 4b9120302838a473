package relay

import (
	"testing"
)

func TestConnListAddRemoveEach(t *testing.T) {
	var l connList
	cs := make([]*conn, 5)
	for i := range cs {
		cs[i] = &conn{}
		l.add(cs[i])
	}
	l.remove(cs[0]) // the tail
	l.remove(cs[4]) // the head
	l.remove(cs[2]) // the middle
	l.remove(cs[2]) // twice: no effect
	var seen []*conn
	l.each(func(c *conn) {
		seen = append(seen, c)
		l.remove(c) // removing the one given is allowed
	})
	if len(seen) != 2 || seen[0] != cs[3] || seen[1] != cs[1] {
		t.Fatalf("each saw %v, want cs[3], cs[1]", seen)
	}
	if l.len() != 0 || l.head != nil {
		t.Fatalf("list not empty after removing all: len %d", l.len())
	}
}
