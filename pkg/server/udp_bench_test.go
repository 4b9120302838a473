package server

import (
	"context"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// BenchmarkUDPSessionMemory reports the Go heap one open UDP session
// holds in its loop (the session, its map entry, its dial state until
// answered); each also holds one socket in the kernel. The clients are
// raw sockets, so they add nothing to the heap measured.
//
//	go test -run - -bench UDPSessionMemory -benchtime 3x ./pkg/server
func BenchmarkUDPSessionMemory(b *testing.B) {
	be := testnet.StartUDPBackend(b, "a", "")
	const n = 2000
	var total float64
	for b.Loop() {
		total += sessionHeap(b, be.Addr, n)
	}
	b.ReportMetric(total/float64(b.N), "heap-B/session")
}

func sessionHeap(b *testing.B, backend string, n int) float64 {
	lb := startUDPLB(b, []string{backend}, udpOpts{maxSessions: 2 * n, loops: 1})
	defer lb.server.Shutdown(context.Background())
	ua, err := lb.server.UDPAddr("u")
	if err != nil {
		b.Fatal(err)
	}
	to := &unix.SockaddrInet4{Port: ua.Port, Addr: [4]byte{127, 0, 0, 1}}
	fds := make([]int, 0, n)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := int64(ms.HeapAlloc)
	for len(fds) < n {
		for range 100 {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			fds = append(fds, fd)
			if err := unix.Sendto(fd, []byte("s"), 0, to); err != nil {
				b.Fatal(err)
			}
		}
		testnet.Eventually(b, "sessions to open", func() bool { return lb.front.Sessions.Load() >= int64(len(fds)) })
	}
	// Answered sessions: their dial state is gone, as in steady state.
	testnet.Eventually(b, "sessions answered", func() bool { return lb.front.DatagramsToClient.Load() >= int64(n) })
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return float64(int64(ms.HeapAlloc)-before) / float64(n)
}
