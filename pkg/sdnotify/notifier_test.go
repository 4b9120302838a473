package sdnotify

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// service is a Notifier's service whose counts the test sets.
type service struct {
	mu     sync.Mutex
	counts Counts
}

func (s *service) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

func (s *service) Heartbeat(ctx context.Context) error { return nil }

func (s *service) set(c Counts) {
	s.mu.Lock()
	s.counts = c
	s.mu.Unlock()
}

// The STATUS= line says the connections, the UDP sessions with UDP
// listeners only, and each pool's usable backends of all; it is sent again
// when it changed, and Draining prefixes it at once.
func TestNotifierStatusLine(t *testing.T) {
	f := fake(t)
	svc := &service{counts: Counts{Connections: 1, Pools: []PoolCounts{{Name: "web", Usable: 2, Total: 3}}}}
	n := StartNotifier(svc, slog.New(slog.DiscardHandler))
	defer n.Stop()
	status := func(want string) {
		t.Helper()
		f.WaitFor(t, "STATUS="+want, func(n testnet.Notification) bool { return n.Has("STATUS", want) })
	}
	status("1 connection; pools: web 2/3")
	svc.set(Counts{Connections: 412, Sessions: 3, UDP: true, Pools: []PoolCounts{{"web", 3, 3}, {"dns", 2, 3}}})
	status("412 connections, 3 udp sessions; pools: web 3/3, dns 2/3")
	n.Draining()
	status("draining: 412 connections, 3 udp sessions; pools: web 3/3, dns 2/3")
}

// Without NOTIFY_SOCKET the notifier starts nothing, and stops at once.
func TestNotifierWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	testnet.CheckLeaks(t)
	n := StartNotifier(&service{}, slog.New(slog.DiscardHandler))
	n.Draining()
	n.Stop()
}
