package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The cost of relaying datagrams through one loop, per datagram echoed
// (client to backend and back): what the listener's and the sessions'
// receive paths add shows here.
//
//	go test -run - -bench UDPRelay -count 6 ./pkg/proxy

// BenchmarkUDPRelayStream: one client keeps a window of datagrams in
// flight on one session, so the listener socket and the session socket
// are read in batches.
func BenchmarkUDPRelayStream(b *testing.B) {
	be := testnet.StartUDPBackend(b, "a", "")
	lb := startUDPLB(b, []string{be.Addr}, udpOpts{loops: 1})
	c := benchClient(b, lb.addr)
	const window = 16
	p := make([]byte, 64)
	buf := make([]byte, 2048)
	sent := 0
	b.ResetTimer()
	for sent < b.N {
		k := min(window, b.N-sent)
		for range k {
			if _, err := c.Write(p); err != nil {
				b.Fatal(err)
			}
		}
		sent += k
		for range k {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Read(buf); err != nil {
				b.Fatalf("echo %d of %d: %v (a datagram lost: run it again)", sent, b.N, err)
			}
		}
	}
}

// BenchmarkUDPRelaySessions: every request is a session of its own
// (responses = 1, sockets not reused): socket, connect, register, send,
// receive and close per datagram, with 8 clients' requests in flight.
func BenchmarkUDPRelaySessions(b *testing.B) {
	be := testnet.StartUDPBackend(b, "a", "")
	lb := startUDPLB(b, []string{be.Addr}, udpOpts{loops: 1, responses: 1})
	const clients = 8
	cs := make([]*net.UDPConn, clients)
	for i := range cs {
		cs[i] = benchClient(b, lb.addr)
	}
	p := make([]byte, 64)
	buf := make([]byte, 2048)
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(clients, b.N-done)
		for _, c := range cs[:k] {
			if _, err := c.Write(p); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range cs[:k] {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Read(buf); err != nil {
				b.Fatalf("reply %d of %d: %v (a datagram lost: run it again)", done, b.N, err)
			}
		}
		done += k
	}
}

func benchClient(b *testing.B, addr string) *net.UDPConn {
	b.Helper()
	ra, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
