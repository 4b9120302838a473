package handoff

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/membership"
	"github.com/l4lb/l4lb/pkg/pool"
)

// Inheritance is what this process received open from the process it
// replaces (an upgrade) or from systemd (socket activation): listening
// sockets, and with an upgrade its state and the pipe to say it is ready.
type Inheritance struct {
	From    string // "upgrade", "systemd" or "" (nothing inherited)
	Sockets *listener.InheritedSet
	State   *State     // nil: none, or none that could be read
	Parent  int        // the old process's pid (an upgrade)
	ready   int        // the upgrade's readiness pipe; -1: none
	feed    int        // the upgrade's breaker feed (feed.go); -1: none
	flows   *flowsConn // the upgrade's flows socket (flows.go); nil: none
}

// None is a plain start.
func None() *Inheritance { return &Inheritance{ready: -1, feed: -1} }

// Take collects what the environment says was passed, and
// clears the variables, so nothing this process starts takes them for its
// own. Problems are logged: a socket that is not one is closed, a bad
// state document means a fresh start with a warning; none stops the start.
func Take(log *slog.Logger) *Inheritance {
	in := None()
	if os.Getenv(EnvParent) != "" {
		in.fromUpgrade(log)
	} else if os.Getenv(envListenFDs) != "" {
		in.fromSystemd(log)
	}
	for _, k := range inheritedVars {
		os.Unsetenv(k)
	}
	return in
}

func (in *Inheritance) fromUpgrade(log *slog.Logger) {
	parent, err := strconv.Atoi(os.Getenv(EnvParent))
	if err != nil || parent != os.Getppid() {
		log.Warn("ignoring upgrade variables meant for another process", "parent", os.Getenv(EnvParent), "ppid", os.Getppid())
		return
	}
	in.From, in.Parent = "upgrade", parent
	in.ready, _ = envFD(EnvReady)
	in.takeSockets(socketFDs(os.Getenv(EnvSockets)), log)
	if in.ready >= 0 {
		unix.CloseOnExec(in.ready)
	}
	if fd, ok := parentFD(os.Getenv(EnvBreakerFeed), parent); ok {
		unix.CloseOnExec(fd)
		in.feed = fd
	}
	if fd, ok := parentFD(os.Getenv(EnvFlows), parent); ok {
		unix.CloseOnExec(fd)
		in.flows = newFlowsConn(fd)
	}
	stateFD, ok := envFD(EnvState)
	if !ok {
		log.Warn("upgrade: no state from the old process; breaker state, disables, health, drains and weights start fresh")
		return
	}
	f := os.NewFile(uintptr(stateFD), "upgrade-state")
	defer f.Close()
	st, err := Decode(f)
	if err != nil {
		log.Warn("upgrade: cannot read the old process's state; breaker state, disables, health, drains and weights start fresh",
			"error", err)
		return
	}
	in.State = st
	log.Info("upgrade: taking over", "from_pid", st.FromPID, "from_version", st.FromVersion,
		"breaker_entries", len(st.Breaker), "backends", len(st.Health), "runtime_changes", len(st.Runtime))
}

func (in *Inheritance) fromSystemd(log *slog.Logger) {
	if p, err := strconv.Atoi(os.Getenv(envListenPID)); err != nil || p != os.Getpid() {
		return // meant for another process
	}
	n, err := strconv.Atoi(os.Getenv(envListenFDs))
	if err != nil || n < 0 {
		log.Warn("ignoring a malformed LISTEN_FDS", "LISTEN_FDS", os.Getenv(envListenFDs))
		return
	}
	in.From = "systemd"
	fds := make([]int, n)
	for i := range fds {
		fds[i] = listenFDsStart + i
	}
	in.takeSockets(fds, log)
}

func (in *Inheritance) takeSockets(fds []int, log *slog.Logger) {
	for _, fd := range fds {
		unix.CloseOnExec(fd) // no child of ours inherits them unasked
	}
	set, errs := listener.NewInheritedSet(fds)
	for _, err := range errs {
		log.Warn("inherited fd closed: not a socket l4lb can serve", "from", in.From, "error", err)
	}
	in.Sockets = set
}

// AdminListener is the inherited TCP socket bound to the admin
// endpoint's address (the old process's endpoint, or a systemd socket
// there), as a net.Listener; nil when there is none. Call it after the
// listeners took theirs: the configuration never puts a TCP listener
// there.
func (in *Inheritance) AdminListener(listen string, log *slog.Logger) net.Listener {
	if listen == "" {
		return nil
	}
	fds := in.Sockets.Take(config.ProtocolTCP, listen)
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
	log.Info("admin endpoint on an inherited socket", "addr", listen, "from", in.From)
	return ln
}

// CloseRest closes the inherited sockets no listener took (listeners the
// new configuration no longer has), and a breaker feed no store took.
func (in *Inheritance) CloseRest(log *slog.Logger) {
	if in.feed >= 0 { // a fleet now: its breaker state is in Redis
		unix.Close(in.feed)
		in.feed = -1
	}
	count := map[string]int{}
	var order []string
	for _, s := range in.Sockets.Rest() {
		if count[s.String()] == 0 {
			order = append(order, s.String())
		}
		count[s.String()]++
		unix.Close(s.FD)
	}
	for _, s := range order {
		log.Info("inherited sockets closed: no listener of this configuration is bound there", "address", s,
			"sockets", count[s], "from", in.From)
	}
}

// TakeUp restores, in a starting process, what the process before it
// and operators left: the upgrade's breaker state into store, following
// the old process's changes since (follower, for the caller to stop;
// returned even when TakeUp fails), and the state file's manual disables; store is
// nil when the breaker state is a fleet's, in Redis, and none of that
// applies. It returns the drains and weights the pools start with: the
// old process's live ones, fresher than any state file and there without
// one, else the state file's. A state file that cannot be read is an
// error.
func (in *Inheritance) TakeUp(sf *StateFile, store *breaker.MemoryStore, log *slog.Logger) (_ map[string]pool.Runtime, follower *Follower, err error) {
	if store != nil {
		follower = in.restoreStore(store, log)
	}
	runtime, disabled, err := sf.Load()
	if err != nil {
		return nil, follower, err
	}
	if rt := in.State.RuntimeByKey(); rt != nil {
		runtime = rt
	}
	if store != nil {
		restoreDisables(store, disabled, log)
	}
	return runtime, follower, nil
}

// restoreStore loads the upgrade's breaker state into store, and follows
// the old process's changes since (the returned follower, to stop; nil
// without a feed).
func (in *Inheritance) restoreStore(store *breaker.MemoryStore, log *slog.Logger) *Follower {
	if in.State != nil {
		if err := in.State.Restore(store); err != nil {
			log.Warn("upgrade: breaker state not restored; breakers and disables start fresh", "error", err)
		}
	}
	if in.feed < 0 {
		return nil
	}
	fd := in.feed
	in.feed = -1
	return followBreakerFeed(fd, store, in.State, log)
}

// Members restores, in a starting process, the backends the admin API
// added: the upgrade's old process's, fresher than any state file and
// there without one, else the state file's; and the old process's
// discovered sets. It reports whether it restored discovered sets (the
// process then serves them at once, without waiting for its first
// lookups).
func (in *Inheritance) Members(sf *StateFile, set *membership.Set, log *slog.Logger) (discovered bool, err error) {
	if in.State != nil && in.State.Members != nil {
		return in.State.RestoreMembers(set), nil
	}
	added, err := sf.LoadMembers()
	if err != nil {
		return false, err
	}
	set.Restore(added)
	if n := len(added); n > 0 {
		log.Info("state_file: backends added through the API restored", "pools", n)
	}
	return false, nil
}

// InitialHealth is the upgrade's health by pool (see State).
func (in *Inheritance) InitialHealth(cfg *config.Config) map[string]map[string]bool {
	return in.State.InitialHealth(cfg)
}

// RefuseUntilServing refuses, on an upgrade's new process, operators'
// actions and reloads until the returned serving is called, once this
// process serves (TellReady told the old one). The admin socket is the
// old process's too, so requests reach this one from the moment it
// listens: an action or a reload taken before the old process hands over
// would be lost if the upgrade then fails. Without an upgrade it refuses
// nothing.
func (in *Inheritance) RefuseUntilServing(r Refuser) (serving func()) {
	if in.From != "upgrade" {
		return func() {}
	}
	why := fmt.Sprintf("this process is taking over from pid %d and acts once it serves (act again in a moment)", in.Parent)
	allowActions, allowReloads := r.RefuseActions(why), r.RefuseReloads(why)
	return func() { allowActions(); allowReloads() }
}

// TellReady tells the old process this one serves (after the hello that
// offers to adopt its connections): it then stops accepting and hands
// them over. Nothing to do without an upgrade.
func (in *Inheritance) TellReady(log *slog.Logger) {
	if in.ready < 0 {
		return
	}
	in.sayHello(log)
	f := os.NewFile(uintptr(in.ready), "upgrade-ready")
	in.ready = -1
	defer f.Close()
	if _, err := fmt.Fprintf(f, "READY %d\n", os.Getpid()); err != nil {
		log.Warn("upgrade: cannot tell the old process this one is ready; it stops it when its wait runs out", "error", err)
	}
}
