package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// Shutdown with sessions open (answered, and with their first datagram
// still unanswered) and sockets parked: every session ends as shutdown,
// every socket is closed, every backend's count is given back, and a
// dial still waiting for its reply is no evidence either way.
func TestUDPShutdownEndsEverySessionAndClosesEverySocket(t *testing.T) {
	addr := answerN(t)
	fds := countOpenFDs(t)
	lb := startUDPLB(t, []string{addr}, udpOpts{responses: 2, replyTimeout: time.Hour, loops: 1, reuseSockets: true})
	f := lb.front
	var cs []*net.UDPConn
	send := func(p string) *net.UDPConn {
		c := udpClient(t, lb.addr)
		cs = append(cs, c)
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Answered once of twice: open. Never answered: open, the dial pending.
	for i, p := range []string{"1 a", "1 b", "1 c", "0 d", "0 e"} {
		if p[0] == '1' {
			if got := readOne(t, send(p)); got != p {
				t.Fatalf("client %d got %q", i, got)
			}
			continue
		}
		send(p)
	}
	// Answered twice: parked. Both reach the loop at once, so neither can
	// reuse the other's socket.
	release := stallLoop(t, lb.server.loops[0])
	twice := []*net.UDPConn{send("2 f"), send("2 g")}
	release()
	for _, c := range twice {
		readOne(t, c)
		readOne(t, c)
	}
	testnet.Eventually(t, "5 sessions open and 2 sockets parked", func() bool {
		return f.Sessions.Load() == 5 && f.Parked.Load() == 2 && taken(f) == 7
	})
	for _, c := range cs {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := lb.server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if s, p, e := f.Sessions.Load(), f.Parked.Load(), f.Ended[udpsession.EndShutdown].Load(); s != 0 || p != 0 || e != 5 {
		t.Errorf("after shutdown: %d sessions, %d parked, %d ended as shutdown; want 0, 0, 5", s, p, e)
	}
	b := lb.pool.Backends()[0]
	if n := b.Active(); n != 0 {
		t.Errorf("backend still counts %d after shutdown", n)
	}
	if ok, failed := b.Dials(pool.DialClient); ok != 5 || failed != 0 {
		t.Errorf("dials %d ok, %d failed; want 5 answered, and the 2 unanswered ones no evidence", ok, failed)
	}
	if n := countOpenFDs(t); n != fds {
		t.Errorf("%d fds open after shutdown, %d before l4lb started", n, fds)
	}
}
