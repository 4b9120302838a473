package server

import (
	"slices"
	"testing"
)

// ListenerPools names each listener's pool and protocol.
func TestListenerPoolsNameEachListenersPool(t *testing.T) {
	tcp := startLB(t, poolTOML(t, "round-robin", []string{closedAddr(t)}, ""), 0)
	udp := startUDPLB(t, []string{closedAddr(t)}, udpOpts{})
	for _, c := range []struct {
		s    *Server
		want []ListenerPool
	}{
		{tcp.server, []ListenerPool{{Name: "front", Protocol: "tcp", Pool: "p"}}},
		{udp.server, []ListenerPool{{Name: "u", Protocol: "udp", Pool: "u"}}},
	} {
		if got := c.s.ListenerPools(); !slices.Equal(got, c.want) {
			t.Errorf("ListenerPools: %+v, want %+v", got, c.want)
		}
	}
}
