package pool

import (
	"time"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// ProxyProtocol is the PROXY protocol version the pool's backends are sent
// before any client byte: 0 (off), 1 or 2.
func (p *Pool) ProxyProtocol() int {
	switch p.cfg.ProxyProtocol {
	case config.ProxyProtocolV1:
		return 1
	case config.ProxyProtocolV2:
		return 2
	}
	return 0
}

// Keepalive is TCP keepalive on the pool's backend connections.
func (p *Pool) Keepalive() sockopt.Keepalive {
	return sockopt.Keepalive{Idle: p.cfg.Keepalive, Interval: p.cfg.KeepaliveInterval, Count: p.cfg.KeepaliveCount}
}

// keepaliveOf is the same for a listener's client side.
func keepaliveOf(idle, interval time.Duration, count int) sockopt.Keepalive {
	return sockopt.Keepalive{Idle: idle, Interval: interval, Count: count}
}
