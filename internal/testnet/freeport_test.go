package testnet

import (
	"fmt"
	"net"
	"testing"
)

// FreePort's ports are never the kernel's pick for a bind to port 0 (which
// another test process could take meanwhile), never handed out twice, and
// bindable for TCP and UDP.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi, ok := outsideEphemeral()
	if !ok {
		t.Skip("no room outside this machine's ephemeral port range")
	}
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if p < lo || p > hi {
			t.Fatalf("port %d outside [%d, %d]: the kernel may hand it to a bind to port 0", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	p := FreePort(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("TCP on the free port: %v", err)
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("UDP on the free port: %v", err)
	}
	pc.Close()
}
