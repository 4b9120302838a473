package pool

import (
	"net"

	"github.com/l4lb/l4lb/pkg/splice"
)

// Relay relays client to the upstream until both are done, keeping the
// backend's active count and byte meters, and closes both connections.
func (p *Pool) Relay(client net.Conn, up Upstream) splice.Result {
	b := up.Backend
	b.active.Add(1)
	res := p.relayer.Relay(client, up.Conn, &b.Meter)
	b.active.Add(-1)
	if res.Outcome == splice.BackendReset && res.ToClient == 0 {
		p.ReportEarlyReset(up)
	}
	return res
}
