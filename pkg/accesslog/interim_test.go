package accesslog

import (
	"testing"
	"time"
)

type flowConn struct {
	id     int
	at     Entry[*flowConn]
	writes []int64
}

// run looks at s as a loop's timer would, from now until end: at each
// look's next, or every tick when asked. It returns the most one look
// took.
func run(s *Schedule[*flowConn], now, end, interval int64) (most int) {
	for now < end {
		taken, next := s.Take(now, interval, func(c *flowConn) { c.writes = append(c.writes, now) })
		most = max(most, taken)
		if next == 0 {
			return most
		}
		if next <= now {
			panic("next look not after now")
		}
		now = next
	}
	return most
}

// 10,000 connections opened in one turn: their first interim records
// spread over the looks after the first interval, each look taking at
// most Budget; from then on each connection gets one record per interval,
// never two closer than the interval nor further apart than the
// interval and a tick.
func TestScheduleSpreadsABurst(t *testing.T) {
	const n = 10000
	interval := int64(time.Second)
	tick := interval / Ticks
	var s Schedule[*flowConn]
	conns := make([]*flowConn, n)
	for i := range conns {
		conns[i] = &flowConn{id: i}
		s.Add(&conns[i].at, conns[i], 0)
	}
	end := 10 * interval
	if most := run(&s, interval, end, interval); most > Budget(n) {
		t.Errorf("a look took %d, want at most %d", most, Budget(n))
	}
	if Budget(n) > 2*n/Ticks+1 {
		t.Errorf("Budget(%d) = %d: more than twice a look's share", n, Budget(n))
	}
	firstBy := interval + int64(n/(Budget(n)-n/Ticks)+1)*tick // the burst is worked off at budget minus the share due
	for _, c := range conns {
		if len(c.writes) < 8 {
			t.Fatalf("conn %d: %d records in 10 intervals", c.id, len(c.writes))
		}
		if w := c.writes[0]; w < interval || w > firstBy {
			t.Fatalf("conn %d: first record at %v, want within [%v, %v]", c.id, time.Duration(w), time.Duration(interval), time.Duration(firstBy))
		}
		for i := 1; i < len(c.writes); i++ {
			if gap := c.writes[i] - c.writes[i-1]; gap < interval || gap > interval+tick {
				t.Fatalf("conn %d: records %v apart, want [%v, %v]", c.id, time.Duration(gap), time.Duration(interval), time.Duration(interval+tick))
			}
		}
	}
}

// Connections opened at a steady rate: every look takes about its share
// (n/Ticks), and each connection gets exactly one record per interval.
func TestScheduleSteady(t *testing.T) {
	const n = 5000
	interval := int64(time.Second)
	var s Schedule[*flowConn]
	conns := make([]*flowConn, n)
	for i := range conns {
		conns[i] = &flowConn{id: i}
		s.Add(&conns[i].at, conns[i], int64(i)*interval/n)
	}
	start := interval // the last opened at just under an interval
	end := start + 5*interval
	most := run(&s, start, end, interval)
	if share := n / Ticks; most > share+share/2 {
		t.Errorf("a look took %d, want about %d (n/Ticks)", most, share)
	}
	for _, c := range conns {
		if len(c.writes) != 4 && len(c.writes) != 5 {
			// Due 5 times from start to end, the last of them a tick late
			// at most: past end for the ones opened in the last tick.
			t.Fatalf("conn %d: %d records in 5 intervals", c.id, len(c.writes))
		}
		for k, w := range c.writes {
			opened := int64(c.id) * interval / n
			// Its k-th record is due (k+1) intervals after it opened: it
			// comes at that look or the next.
			if due := opened + int64(k+1)*interval; w < due || w > due+interval/Ticks {
				t.Fatalf("conn %d: record %d at %v, due at %v", c.id, k, time.Duration(w), time.Duration(due))
			}
		}
	}
}

// Removed entries are never written; Clear empties the schedule; an entry
// listed twice is listed once.
func TestScheduleRemoveAndClear(t *testing.T) {
	interval := int64(time.Second)
	var s Schedule[*flowConn]
	a, b, c := &flowConn{id: 1}, &flowConn{id: 2}, &flowConn{id: 3}
	s.Add(&a.at, a, 0)
	s.Add(&b.at, b, 0)
	s.Add(&b.at, b, 0)
	s.Add(&c.at, c, 10)
	if s.Len() != 3 {
		t.Fatalf("Len %d, want 3", s.Len())
	}
	s.Remove(&b.at)
	s.Remove(&b.at)
	if taken, next := s.Take(interval, interval, func(f *flowConn) { f.writes = append(f.writes, 1) }); taken != 1 || next != interval+interval/Ticks {
		t.Fatalf("took %d, next %d: want a alone, and c (due 10ns later) at the next tick", taken, next)
	}
	if len(a.writes) != 1 || len(b.writes) != 0 {
		t.Fatalf("a %v, b %v", a.writes, b.writes)
	}
	s.Clear()
	if s.Len() != 0 || a.at.Listed() || c.at.Listed() || a.at.v != nil {
		t.Fatalf("after Clear: Len %d, a listed %v, c listed %v", s.Len(), a.at.Listed(), c.at.Listed())
	}
	if taken, next := s.Take(2*interval, interval, nil); taken != 0 || next != 0 {
		t.Fatalf("empty schedule took %d, next %d", taken, next)
	}
}
