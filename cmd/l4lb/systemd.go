package main

import (
	"context"

	"github.com/l4lb/l4lb/pkg/sdnotify"
)

// Counts is what in's STATUS= line says (sdnotify.Notifier): connections,
// UDP sessions with UDP listeners, and each pool serving now's usable
// backends.
func (in *instance) Counts() sdnotify.Counts {
	c := sdnotify.Counts{Connections: in.server.Active(), Sessions: in.server.Sessions(), UDP: len(in.server.UDPFronts()) > 0}
	for _, p := range in.livePools() {
		pc := sdnotify.PoolCounts{Name: p.Name, Total: len(p.Backends())}
		for _, be := range p.Backends() {
			if be.InRotation() {
				pc.Usable++
			}
		}
		c.Pools = append(c.Pools, pc)
	}
	return c
}

// Heartbeat returns once every event loop ran a task posted to it: the
// systemd watchdog is pinged only then.
func (in *instance) Heartbeat(ctx context.Context) error { return in.server.Heartbeat(ctx) }
