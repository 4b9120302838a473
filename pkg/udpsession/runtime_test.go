package udpsession

import (
	"context"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// An operator's drain that reaches its deadline ends the UDP sessions
// still on the backend, as it resets TCP relays: the client's next
// datagram is re-picked, and the backend is left with nothing.
func TestUDPDrainDeadlineMovesSessionsOff(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	b := testnet.StartUDPBackend(t, "b", "")
	r := newUDPRig(t, []string{a.Addr, b.Addr}, udpRigOpts{})
	c := r.client()
	first, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var drained *pool.Backend
	for _, be := range r.pool.Backends() {
		if (string(first) == "a") == (be.Addr == a.Addr) {
			drained = be
		}
	}
	if err := r.pool.Drain(context.Background(), drained, 0); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the drained backend's sessions to end at the deadline", func() bool { return drained.Active() == 0 })
	got, err := replyWithin(c, []byte("who"), 20*time.Second)
	if err != nil || string(got) == string(first) {
		t.Fatalf("after the drain's deadline the client still reaches %q (%q, %v)", first, got, err)
	}
	if n := r.front.Ended[EndMoved].Load(); n != 1 {
		t.Errorf("%d sessions ended as moved, want the drained one", n)
	}
}

// A reload that shortens session_timeout applies to the sessions already
// idle: they end by the new timeout, not by the old one.
func TestUDPShorterSessionTimeoutAppliesToIdleSessions(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	r := newUDPRig(t, []string{a.Addr}, udpRigOpts{loops: 2,
		settings: func(s *Settings) { s.SessionTimeout = time.Hour }})
	c := r.client()
	if _, err := replyWithin(c, []byte("q"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	set := *r.front.Settings()
	set.SessionTimeout = 200 * time.Millisecond
	r.front.Set(set)
	testnet.Eventually(t, "the idle session to end by the new session_timeout", func() bool {
		return r.front.Ended[EndTimeout].Load() == 1 && r.front.Sessions.Load() == 0
	})
}

// A reload that turns reuse_sockets off stops the reuse at once: a socket
// parked before it is not handed to the next session.
func TestUDPReuseTurnedOffHandsOutNoParkedSocket(t *testing.T) {
	a := testnet.StartUDPBackend(t, "a", "")
	r := newUDPRig(t, []string{a.Addr}, udpRigOpts{
		settings: func(s *Settings) { s.Responses, s.ReuseSockets = 1, true }})
	if _, err := replyWithin(r.client(), []byte("q"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the session's socket to be parked", func() bool { return r.front.Parked.Load() == 1 })
	set := *r.front.Settings()
	set.ReuseSockets = false
	r.front.Set(set)
	if _, err := replyWithin(r.client(), []byte("q"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := a.Sources(); n != 2 {
		t.Fatalf("the backend saw %d source ports for two sessions: a socket parked before reuse_sockets went off was reused", n)
	}
}
