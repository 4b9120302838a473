package accesslog

import (
	"sync"
	"testing"
	"time"
)

// A full ring drops and counts; what it holds comes out in order; a ring
// is reusable once drained.
func TestQueueDropsWhenFull(t *testing.T) {
	q := NewQueue(2, 16)
	if q.Capacity() != 32 {
		t.Fatalf("capacity %d, want 32", q.Capacity())
	}
	for i := range 20 {
		q.Push(0, &Record{ToBackend: int64(i)})
	}
	q.Push(1, &Record{ToBackend: 100})
	q.Push(2, &Record{}) // no such loop
	if d := q.Dropped(); d != 5 {
		t.Fatalf("dropped %d, want 4 past the full ring and 1 for a loop the queue has no ring for", d)
	}
	var got []int64
	if n := q.Drain(func(r *Record) { got = append(got, r.ToBackend) }); n != 17 {
		t.Fatalf("drained %d, want 17", n)
	}
	for i := range 16 {
		if got[i] != int64(i) {
			t.Fatalf("record %d is %d: out of order (%v)", i, got[i], got)
		}
	}
	if got[16] != 100 {
		t.Fatalf("the second loop's record is %d", got[16])
	}
	for i := range 16 {
		q.Push(0, &Record{ToBackend: int64(i)})
	}
	if q.Dropped() != 5 || q.Drain(func(*Record) {}) != 16 {
		t.Fatal("a drained ring does not take a full ring's worth again")
	}
}

// The writer sleeping in Wait is woken by a push from any loop, and
// released by stop.
func TestQueueWait(t *testing.T) {
	q := NewQueue(2, 16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 2 {
		woke := make(chan bool)
		wg.Go(func() { woke <- q.Wait(stop) })
		// The push may come before or after Wait set its flag; either way
		// Wait returns.
		q.Push(id, &Record{})
		select {
		case ok := <-woke:
			if !ok {
				t.Fatal("Wait reported stop")
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("a push from loop %d did not wake the writer", id)
		}
		if q.Drain(func(*Record) {}) != 1 {
			t.Fatal("the record is not there")
		}
	}
	woke := make(chan bool)
	wg.Go(func() {
		for q.Wait(stop) { // a wake-up left over from the pushes above is spurious
		}
		woke <- false
	})
	close(stop)
	select {
	case <-woke:
	case <-time.After(20 * time.Second):
		t.Fatal("stop did not release Wait")
	}
	wg.Wait()
}
