package server

import (
	"fmt"
	"net"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// A wildcard listener answers from the address each client sent to: a
// client whose socket is connected to that address accepts nothing else.
func TestUDPWildcardRepliesFromTheAddressSentTo(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	port := testnet.FreePort(t)
	startUDPLB(t, []string{be.Addr}, udpOpts{bind: fmt.Sprintf("0.0.0.0:%d", port)})
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.53"} {
		c := udpClient(t, fmt.Sprintf("%s:%d", ip, port))
		mustEcho(t, c, []byte("to "+ip))
	}
}

func TestUDPOverIPv6(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		c.Close()
	}
	be := testnet.StartUDPBackend(t, "a", "[::1]:0")
	t.Run("bound", func(t *testing.T) {
		lb := startUDPLB(t, []string{be.Addr}, udpOpts{bind: "[::1]:0"})
		mustEcho(t, udpClient(t, lb.addr), make([]byte, 60000))
	})
	t.Run("wildcard", func(t *testing.T) {
		port := testnet.FreePort(t)
		startUDPLB(t, []string{be.Addr}, udpOpts{bind: fmt.Sprintf("[::]:%d", port)})
		mustEcho(t, udpClient(t, fmt.Sprintf("[::1]:%d", port)), []byte("six"))
	})
}

// A pool whose backend is the listener itself would bounce one datagram
// between l4lb's sessions until max_sessions: the second hop is dropped.
func TestUDPBackendThatIsTheListenerItselfIsALoop(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	lb := startUDPLB(t, []string{addr}, udpOpts{bind: addr, maxSessions: 100, loops: 1})
	c := udpClient(t, lb.addr)
	c.Write([]byte("echo?"))
	testnet.Eventually(t, "the loop to be caught", func() bool { return lb.front.Drops[udpsession.DropLoop].Load() > 0 })
	if got := lb.front.Started.Load(); got > 2 {
		t.Errorf("%d sessions started for one datagram: the loop went round", got)
	}
}
