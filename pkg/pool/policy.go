package pool

import (
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/sockopt"
)

// ProxyProtocol is the PROXY protocol version the pool's backends are sent
// before any client byte: 0 (off), 1 or 2. Read on every connect, so it is
// decided once, at New.
func (p *Pool) ProxyProtocol() int { return p.proxyVersion }

func proxyVersion(v string) int {
	switch v {
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
