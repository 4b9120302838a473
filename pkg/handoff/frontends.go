package handoff

import (
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/server"
)

// Frontends gives each listener the inherited sockets bound to its
// address (protocol and bind), so server.New serves them instead of
// binding. The slices are the ones the frontends hold: server.New marks
// the fds it took with -1, and CloseUntaken closes the rest.
func (in *Inheritance) Frontends(fronts []server.Frontend, log *slog.Logger) {
	for i := range fronts {
		proto := fronts[i].Protocol
		if proto == "" {
			proto = config.ProtocolTCP
		}
		fds := in.Sockets.Take(proto, fronts[i].Bind)
		if len(fds) == 0 {
			continue
		}
		fronts[i].FDs = fds
		log.Info("listener on inherited sockets", "listener", fronts[i].Name, "protocol", proto,
			"addr", fronts[i].Bind, "sockets", len(fds), "from", in.From)
	}
}

// CloseUntaken closes the inherited sockets of fronts that server.New did
// not take over (it failed).
func CloseUntaken(fronts []server.Frontend) {
	for _, f := range fronts {
		for i, fd := range f.FDs {
			if fd >= 0 {
				unix.Close(fd)
				f.FDs[i] = -1
			}
		}
	}
}
