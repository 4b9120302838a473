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

// Sessions handed over are inserted where their last activity places
// them, in whatever order they come, among sessions of this process, and
// the list stays whole when the session the search starts from goes.
func TestSessionListInsertsByActivity(t *testing.T) {
	var l sessionList
	at := func(last int64) *session { return &session{lastActive: last} }
	for _, last := range []int64{10, 20, 30} { // this process's own
		l.pushBack(at(last))
	}
	for _, last := range []int64{1, 2, 15, 5, 40, 30, 0, 25} {
		s := at(last)
		l.insertByActivity(s)
		if last == 15 {
			l.remove(s) // the finger goes: the next search starts from its neighbour
		}
	}
	var got []int64
	for s := l.head; s != nil; s = s.next {
		got = append(got, s.lastActive)
		if s.next != nil && s.next.prev != s || s.next == nil && l.tail != s {
			t.Fatalf("broken links at %d", s.lastActive)
		}
	}
	want := []int64{0, 1, 2, 5, 10, 20, 25, 30, 30, 40}
	if len(got) != len(want) || l.len() != len(want) {
		t.Fatalf("order %v (len %d), want %v", got, l.len(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}
