package admin

import (
	"errors"
	"log/slog"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/config"
)

// StartOn is Start on ln, a listening socket already bound to c.Listen:
// the endpoint of the process this one replaces (a binary upgrade), or a
// socket systemd passed. Clients queued on it are served, not refused.
// On an error ln is closed.
func StartOn(ln net.Listener, c config.Admin, src Sources, log *slog.Logger) (*Server, error) {
	s, err := startOn(ln, c, src, log, defaultTimeouts)
	if err != nil {
		ln.Close()
	}
	return s, err
}

// DupListener returns a close-on-exec duplicate of the endpoint's
// listening socket, for the process taking the endpoint over (its
// StartOn). The caller closes it. The duplicate is made from the raw
// descriptor: os.File's Fd would switch the shared socket to blocking
// mode under this process's own accept loop.
func (s *Server) DupListener() (int, error) {
	sc, ok := s.ln.Listener.(syscall.Conn)
	if !ok {
		return -1, errors.New("admin endpoint: listener has no descriptor")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(u uintptr) { fd, derr = unix.FcntlInt(u, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, derr
}
