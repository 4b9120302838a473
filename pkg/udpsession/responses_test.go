package udpsession

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A backend that sends more than `responses` replies: those past the
// limit that arrive in the same batch as the last one owed are not
// relayed, and each is counted as a dropped datagram (excess_reply).
func TestUDPRepliesPastResponsesAreCountedAsDropped(t *testing.T) {
	be, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	r := newUDPRig(t, []string{be.LocalAddr().String()}, udpRigOpts{
		settings: func(s *Settings) { s.Responses = 1 }})
	c := r.client()
	if _, err := c.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	be.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, from, err := be.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	client := c.LocalAddr().(*net.UDPAddr).AddrPort()
	l := r.loops[0]
	var sendErr error
	r.on(l, func() {
		s := l.udps[0].sessions[client]
		if s == nil {
			sendErr = errors.New("no session for the client")
			return
		}
		// Three replies, all queued before the loop reads any: one
		// recvmmsg takes them together.
		for _, p := range []string{"r1", "r2", "r3"} {
			if sendErr = sendQueued(be, from, s.fd, []byte(p)); sendErr != nil {
				return
			}
		}
	})
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "r1" {
		t.Fatalf("reply %q, %v; want r1", buf[:n], err)
	}
	testnet.Eventually(t, "the session to end after its one response", func() bool {
		return r.front.Ended[EndResponses].Load() == 1
	})
	// The drops are counted in the same read that ended the session.
	if got := r.front.Drops[DropExcessReply].Load(); got != 2 {
		t.Errorf("%d replies counted dropped as %s, want the 2 past responses = 1", got, DropExcessReply)
	}
	testnet.Eventually(t, "the relayed reply to be counted", func() bool { return r.front.DatagramsToClient.Load() == 1 })
}
