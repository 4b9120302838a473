package udpsession

import (
	"testing"
)

func TestSessionListOrdersByActivity(t *testing.T) {
	var l sessionList
	ss := make([]*session, 4)
	for i := range ss {
		ss[i] = &session{}
		l.pushBack(ss[i])
	}
	order := func() []*session {
		var got []*session
		for s := l.head; s != nil; s = s.next {
			got = append(got, s)
		}
		return got
	}
	same := func(got []*session, want ...*session) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
	l.moveToBack(ss[0]) // the head becomes the most recently active
	l.moveToBack(ss[0]) // already at the back: nothing changes
	l.moveToBack(ss[2]) // from the middle
	if got := order(); !same(got, ss[1], ss[3], ss[0], ss[2]) || l.tail != ss[2] {
		t.Fatalf("order after activity: %v", got)
	}
	l.remove(ss[3]) // the middle
	l.remove(ss[1]) // the head
	l.remove(ss[2]) // the tail
	l.remove(ss[2]) // not in the list any more: no effect (end runs once, but is idempotent)
	if got := order(); !same(got, ss[0]) || l.len() != 1 || l.head != ss[0] || l.tail != ss[0] {
		t.Fatalf("after removals: %v, len %d", got, l.len())
	}
	l.remove(ss[0])
	if l.head != nil || l.tail != nil || l.len() != 0 {
		t.Fatalf("list not empty: len %d", l.len())
	}
	l.pushBack(ss[1]) // a removed session can be listed again
	if l.head != ss[1] || l.tail != ss[1] || ss[1].prev != nil || ss[1].next != nil {
		t.Fatal("a removed session kept stale links")
	}
}
