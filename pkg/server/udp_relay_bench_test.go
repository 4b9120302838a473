package server

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The cost of relaying datagrams through one loop, per datagram echoed
// (client to backend and back): what the listener's and the sessions'
// receive paths add shows here. cpu-ns/op is the process's CPU time (the
// loop's, and the in-process client's and backend's, which are the same
// work on both sides of a comparison): on a busy machine it varies far
// less than the time per op.
//
//	go test -run - -bench UDPRelay -count 6 ./pkg/server

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
	defer reportCPU(b)()
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
	defer reportCPU(b)()
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

// reportCPU starts measuring the process's CPU time; the function it
// returns reports it per op.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
