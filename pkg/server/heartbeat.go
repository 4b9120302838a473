package server

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
)

// Heartbeat reports whether the data path is turning: it posts a no-op
// task to every event loop and waits until each has run it. A loop runs
// its tasks in the same turn as its epoll events (accepts, dials, relays,
// datagrams), so a loop stuck in a turn, or whose thread is stuck, never
// runs it. When ctx ends first, the error names the loops that did not
// turn. Safe from any goroutine; the systemd watchdog pings only after a
// heartbeat succeeded. A server whose loops have stopped (after Shutdown)
// never succeeds.
func (s *Server) Heartbeat(ctx context.Context) error {
	if len(s.loops) == 0 {
		return nil
	}
	turned := make([]atomic.Bool, len(s.loops))
	left := atomic.Int64{}
	left.Store(int64(len(s.loops)))
	all := make(chan struct{})
	for i, l := range s.loops {
		l.Post(func() {
			turned[i].Store(true)
			if left.Add(-1) == 0 {
				close(all)
			}
		})
	}
	select {
	case <-all:
		return nil
	case <-ctx.Done():
	}
	var stuck []int
	for i := range turned {
		if !turned[i].Load() {
			stuck = append(stuck, i)
		}
	}
	if len(stuck) == 0 { // they all turned as ctx ended
		return nil
	}
	return fmt.Errorf("proxy: %s did not turn: %w", loopList(stuck), context.Cause(ctx))
}

// loopList names loops by id: "event loop 3", "event loops 1, 3 and 4".
func loopList(ids []int) string {
	if len(ids) == 1 {
		return fmt.Sprintf("event loop %d", ids[0])
	}
	s := "event loops"
	for i, id := range ids {
		switch {
		case i == 0:
			s += " "
		case i == len(ids)-1:
			s += " and "
		default:
			s += ", "
		}
		s += strconv.Itoa(id)
	}
	return s
}
