package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxy"
)

func pid() int { return os.Getpid() }

// The environment an upgrading l4lb starts its successor with (upgrade.go
// sets it; the successor reads and clears it at start):
//
//	L4LB_UPGRADE_PARENT   the old process's pid (the successor checks it
//	                      is its parent, so a grandchild never takes it)
//	L4LB_UPGRADE_STATE    fd of the state pipe (handoff.go's document)
//	L4LB_UPGRADE_READY    fd to write "READY <pid>" to once serving
//	L4LB_UPGRADE_SOCKETS  "FIRST:COUNT", the listening sockets' fds (the
//	                      listeners' and the admin endpoint's)
const (
	envUpgradeParent  = "L4LB_UPGRADE_PARENT"
	envUpgradeState   = "L4LB_UPGRADE_STATE"
	envUpgradeReady   = "L4LB_UPGRADE_READY"
	envUpgradeSockets = "L4LB_UPGRADE_SOCKETS"
)

// sdListenFDsStart is the first fd systemd passes (SD_LISTEN_FDS_START).
const sdListenFDsStart = 3

// inheritance is what this process received open from the process it
// replaces (an upgrade) or from systemd (socket activation): listening
// sockets, and with an upgrade its state and the pipe to say it is ready.
type inheritance struct {
	from    string // "upgrade", "systemd" or "" (nothing inherited)
	sockets *listener.InheritedSet
	state   *handoffState
	ready   int // the upgrade's readiness pipe; -1: none
	parent  int
	feed    int // the upgrade's breaker feed (breakerfeed.go); -1: none
}

// noInheritance is a plain start.
func noInheritance() *inheritance { return &inheritance{ready: -1, feed: -1} }

// takeInheritance collects what the environment says was passed, and
// clears the variables, so nothing this process starts takes them for its
// own. Problems are logged: a socket that is not one is closed, a bad
// state document means a fresh start with a warning; none stops the start.
func takeInheritance(log *slog.Logger) *inheritance {
	in := noInheritance()
	if os.Getenv(envUpgradeParent) != "" {
		in.fromUpgrade(log)
	} else if os.Getenv("LISTEN_FDS") != "" {
		in.fromSystemd(log)
	}
	for _, k := range []string{envUpgradeParent, envUpgradeState, envUpgradeReady, envUpgradeSockets, envUpgradeBreakerFeed,
		"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(k)
	}
	return in
}

func envFD(key string) (int, bool) {
	v := os.Getenv(key)
	if v == "" {
		return -1, false
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < sdListenFDsStart {
		return -1, false
	}
	return fd, true
}

func (in *inheritance) fromUpgrade(log *slog.Logger) {
	parent, err := strconv.Atoi(os.Getenv(envUpgradeParent))
	if err != nil || parent != os.Getppid() {
		log.Warn("ignoring upgrade variables meant for another process", "parent", os.Getenv(envUpgradeParent), "ppid", os.Getppid())
		return
	}
	in.from, in.parent = "upgrade", parent
	in.ready, _ = envFD(envUpgradeReady)
	var fds []int
	if first, count, ok := strings.Cut(os.Getenv(envUpgradeSockets), ":"); ok {
		f, err1 := strconv.Atoi(first)
		n, err2 := strconv.Atoi(count)
		if err1 == nil && err2 == nil && f >= sdListenFDsStart && n >= 0 {
			for i := range n {
				fds = append(fds, f+i)
			}
		}
	}
	in.takeSockets(fds, log)
	if in.ready >= 0 {
		unix.CloseOnExec(in.ready)
	}
	if fd, ok := feedFD(os.Getenv(envUpgradeBreakerFeed), parent); ok {
		unix.CloseOnExec(fd)
		in.feed = fd
	}
	stateFD, ok := envFD(envUpgradeState)
	if !ok {
		log.Warn("upgrade: no state from the old process; breaker state, disables, health, drains and weights start fresh")
		return
	}
	f := os.NewFile(uintptr(stateFD), "upgrade-state")
	defer f.Close()
	st, err := decodeHandoff(f)
	if err != nil {
		log.Warn("upgrade: cannot read the old process's state; breaker state, disables, health, drains and weights start fresh",
			"error", err)
		return
	}
	in.state = st
	log.Info("upgrade: taking over", "from_pid", st.FromPID, "from_version", st.FromVersion,
		"breaker_entries", len(st.Breaker), "backends", len(st.Health), "runtime_changes", len(st.Runtime))
}

func (in *inheritance) fromSystemd(log *slog.Logger) {
	if p, err := strconv.Atoi(os.Getenv("LISTEN_PID")); err != nil || p != os.Getpid() {
		return // meant for another process
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n < 0 {
		log.Warn("ignoring a malformed LISTEN_FDS", "LISTEN_FDS", os.Getenv("LISTEN_FDS"))
		return
	}
	in.from = "systemd"
	fds := make([]int, n)
	for i := range fds {
		fds[i] = sdListenFDsStart + i
	}
	in.takeSockets(fds, log)
}

func (in *inheritance) takeSockets(fds []int, log *slog.Logger) {
	for _, fd := range fds {
		unix.CloseOnExec(fd) // no child of ours inherits them unasked
	}
	set, errs := listener.NewInheritedSet(fds)
	for _, err := range errs {
		log.Warn("inherited fd closed: not a socket l4lb can serve", "from", in.from, "error", err)
	}
	in.sockets = set
}

// frontends gives each listener the inherited sockets bound to its
// address (protocol and bind), so proxy.New serves them instead of
// binding. The slices are the ones the frontends hold: proxy.New marks
// the fds it took with -1, and closeUntaken closes the rest.
func (in *inheritance) frontends(fronts []proxy.Frontend, log *slog.Logger) {
	for i := range fronts {
		proto := fronts[i].Protocol
		if proto == "" {
			proto = config.ProtocolTCP
		}
		fds := in.sockets.Take(proto, fronts[i].Bind)
		if len(fds) == 0 {
			continue
		}
		fronts[i].FDs = fds
		log.Info("listener on inherited sockets", "listener", fronts[i].Name, "protocol", proto,
			"addr", fronts[i].Bind, "sockets", len(fds), "from", in.from)
	}
}

// closeUntaken closes the inherited sockets of fronts that proxy.New did
// not take over (it failed).
func closeUntaken(fronts []proxy.Frontend) {
	for _, f := range fronts {
		for i, fd := range f.FDs {
			if fd >= 0 {
				unix.Close(fd)
				f.FDs[i] = -1
			}
		}
	}
}

// adminListener is the inherited TCP socket bound to the admin
// endpoint's address (the old process's endpoint, or a systemd socket
// there), as a net.Listener; nil when there is none. Call it after
// frontends: the configuration never puts a TCP listener there.
func (in *inheritance) adminListener(listen string, log *slog.Logger) net.Listener {
	if listen == "" {
		return nil
	}
	fds := in.sockets.Take(config.ProtocolTCP, listen)
	if len(fds) == 0 {
		return nil
	}
	fd := fds[0]
	for _, extra := range fds[1:] {
		unix.Close(extra)
	}
	unix.Listen(fd, unix.SOMAXCONN) // a socket systemd bound may not listen yet
	f := os.NewFile(uintptr(fd), "admin")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		log.Warn("inherited admin socket unusable; binding anew", "error", err)
		return nil
	}
	log.Info("admin endpoint on an inherited socket", "addr", listen, "from", in.from)
	return ln
}

// closeRest closes the inherited sockets no listener took (listeners the
// new configuration no longer has), and a breaker feed no store took.
func (in *inheritance) closeRest(log *slog.Logger) {
	if in.feed >= 0 { // a fleet now: its breaker state is in Redis
		unix.Close(in.feed)
		in.feed = -1
	}
	count := map[string]int{}
	var order []string
	for _, s := range in.sockets.Rest() {
		if count[s.String()] == 0 {
			order = append(order, s.String())
		}
		count[s.String()]++
		unix.Close(s.FD)
	}
	for _, s := range order {
		log.Info("inherited sockets closed: no listener of this configuration is bound there", "address", s,
			"sockets", count[s], "from", in.from)
	}
}

// restoreStore loads the upgrade's breaker state into store, and follows
// the old process's changes since (the returned follower, to stop; nil
// without a feed).
func (in *inheritance) restoreStore(store *breaker.MemoryStore, log *slog.Logger) *feedFollower {
	if in.state != nil {
		if err := in.state.restore(store); err != nil {
			log.Warn("upgrade: breaker state not restored; breakers and disables start fresh", "error", err)
		}
	}
	if in.feed < 0 {
		return nil
	}
	fd := in.feed
	in.feed = -1
	return followBreakerFeed(fd, store, in.state, log)
}

// runtime is the upgrade's drains and weights (see handoffState); nil
// without an upgrade, or from an old process that sent none.
func (in *inheritance) runtime() map[string]pool.Runtime {
	return in.state.runtime()
}

// initialHealth is the upgrade's health by pool (see handoffState).
func (in *inheritance) initialHealth(cfg *config.Config) map[string]map[string]bool {
	return in.state.initialHealth(cfg)
}

// tellReady tells the old process this one serves: it then stops
// accepting and drains. Nothing to do without an upgrade.
func (in *inheritance) tellReady(log *slog.Logger) {
	if in.ready < 0 {
		return
	}
	f := os.NewFile(uintptr(in.ready), "upgrade-ready")
	in.ready = -1
	defer f.Close()
	if _, err := fmt.Fprintf(f, "READY %d\n", os.Getpid()); err != nil {
		log.Warn("upgrade: cannot tell the old process this one is ready; it stops it when its wait runs out", "error", err)
	}
}
