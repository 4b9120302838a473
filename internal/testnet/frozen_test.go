package testnet

import (
	"net"
	"testing"
	"time"
)

func TestFrozenBackendDropsSYNs(t *testing.T) {
	addr := FrozenBackend(t)
	// Only a completed dial fails this; a busy machine can only make a
	// dial time out.
	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a dial to the frozen backend completed")
	}
}
