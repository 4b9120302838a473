package server

import (
	"log/slog"

	"github.com/l4lb/l4lb/pkg/reactor"
	"github.com/l4lb/l4lb/pkg/relay"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// cpuLoop is one event loop of the server (one per CPU): a reactor with
// its TCP relay and its UDP sessions. The reactor's methods (Post, Do,
// Start, Stop...) are its own; listeners go to the part of their protocol.
type cpuLoop struct {
	*reactor.Loop
	tcp *relay.Loop
	udp *udpsession.Loop
}

// newLoop makes loop id of a server whose relays share sh.
func newLoop(id int, sh *relay.Shared, cfg Config, log *slog.Logger) (*cpuLoop, error) {
	r, err := reactor.New(reactor.Config{ID: id, BusyPoll: cfg.BusyPoll, WakeCoalesce: cfg.WakeCoalesce, Log: log})
	if err != nil {
		return nil, err
	}
	udp := udpsession.New(r, sh.Guard)
	udp.UseAccessLog(sh.AccessSink())
	return &cpuLoop{Loop: r, tcp: relay.New(r, sh), udp: udp}, nil
}

// Conns is the number of TCP client connections the loop holds now.
func (l *cpuLoop) Conns() int64 { return l.tcp.Conns() }

// CloseListeners stops the loop's TCP listeners accepting (their
// connections go on) and closes its UDP listeners with their sessions.
func (l *cpuLoop) CloseListeners() {
	l.tcp.CloseListeners()
	l.udp.CloseListeners()
}

// LoopStats is one event loop's counts: how it spent its time, and the TCP
// client connections it holds (an operator reads imbalance between loops
// from these).
type LoopStats struct {
	reactor.Stats
	Conns int64
}
