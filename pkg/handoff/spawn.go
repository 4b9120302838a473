package handoff

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Starting the new process of an upgrade with what the contract passes
// (the package comment), and watching it until it is ready or gone.

// executablePath is the path this process was started as, made absolute,
// so an upgrade runs whatever is at that path now. A symlink stays a
// symlink (os.Executable would resolve it): pointing /usr/local/bin/l4lb
// at a new release and upgrading starts the new release.
func executablePath() string {
	a0 := os.Args[0]
	if !strings.Contains(a0, "/") {
		if p, err := exec.LookPath(a0); err == nil {
			a0 = p
		} else if p, err := os.Executable(); err == nil {
			return p
		}
	}
	if abs, err := filepath.Abs(a0); err == nil {
		return abs
	}
	return a0
}

// newProcess is a started successor.
type newProcess struct {
	pid   int
	pidfd int // signals reach this process even once its pid is reused; -1: no pidfd
	ready chan readyMsg
	// exited is closed once the process is reaped, status then set.
	exited chan struct{}
	status syscall.WaitStatus
	feed   *breakerFeed // nil: a fleet, whose breaker state is in Redis
	flows  *flowsConn   // this end of the flows socket; nil once taken or released
}

type readyMsg struct{ err error }

// kill ends a successor that will not be used, and waits until it is
// reaped.
func (c *newProcess) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	if c.pidfd >= 0 {
		unix.PidfdSendSignal(c.pidfd, unix.SIGKILL, nil, 0)
	} else {
		unix.Kill(c.pid, unix.SIGKILL) // not reaped yet: the pid is still its
	}
	<-c.exited
}

func (c *newProcess) release() {
	if c.flows != nil {
		c.flows.close()
		c.flows = nil
	}
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
}

// spawn starts the new process: fd 3 the state pipe, 4 its readiness
// pipe, 5 on the listening sockets, then the breaker feed's pipe
// (feed.go) unless the breaker state is a fleet's.
func (u *Upgrader) spawn(offer func() (Offer, error)) (*newProcess, error) {
	of, err := offer()
	if err != nil {
		return nil, err
	}
	fds, store := of.Sockets, of.Store
	closeAll := func(fds []int) {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	defer func() { closeAll(fds) }() // the new process has its copies
	feedR, feedW := -1, (*os.File)(nil)
	var feed *breakerFeed
	if store != nil {
		if feedR, feedW, err = newFeedPipe(); err != nil {
			return nil, err
		}
		defer unix.Close(feedR)                      // the new process has its copy
		feed = startBreakerFeed(store, feedW, u.log) // before the state is taken
	}
	state := Capture(store, of.Pools(), u.version)
	state.setMembers(of.Members)

	var statePipe, readyPipe [2]int
	if err := unix.Pipe2(statePipe[:], unix.O_CLOEXEC); err != nil {
		feed.stop(0)
		return nil, fmt.Errorf("state pipe: %w", err)
	}
	if err := unix.Pipe2(readyPipe[:], unix.O_CLOEXEC); err != nil {
		closeAll(statePipe[:])
		feed.stop(0)
		return nil, fmt.Errorf("readiness pipe: %w", err)
	}
	files := []uintptr{0, 1, 2, stateFD: uintptr(statePipe[0]), readyFD: uintptr(readyPipe[1])}
	for _, fd := range fds {
		files = append(files, uintptr(fd))
	}
	feedFD := -1
	if feed != nil { // after the sockets, so their numbering is what older builds expect
		feedFD = len(files)
		files = append(files, uintptr(feedR))
	}
	flowsMine, flowsTheirs, err := newFlowsPair()
	if err != nil {
		closeAll(statePipe[:])
		closeAll(readyPipe[:])
		feed.stop(0)
		return nil, err
	}
	defer unix.Close(flowsTheirs) // the new process has its copy
	flowsFD := len(files)         // last: every other fd keeps the number older builds expect
	files = append(files, uintptr(flowsTheirs))
	env := successorEnv(len(fds), feedFD, flowsFD)
	pid, err := syscall.ForkExec(u.exe, append([]string{u.exe}, u.args...), &syscall.ProcAttr{Env: env, Files: files})
	// The new process has its copies (or none): drop this one's.
	unix.Close(statePipe[0])
	unix.Close(readyPipe[1])
	if err != nil {
		unix.Close(statePipe[1])
		unix.Close(readyPipe[0])
		unix.Close(flowsMine)
		feed.stop(0)
		return nil, err
	}
	c := &newProcess{pid: pid, pidfd: -1, ready: make(chan readyMsg, 1), exited: make(chan struct{}), feed: feed,
		flows: newFlowsConn(flowsMine)}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil { // before anything can reap it
		c.pidfd = fd
	}
	go func() {
		for {
			_, err := syscall.Wait4(pid, &c.status, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		close(c.exited)
	}()
	go func() {
		// A blocking write: the new process reads the whole document
		// before it builds anything; a new process that dies unblocks it.
		w := os.NewFile(uintptr(statePipe[1]), "upgrade-state")
		if err := state.Encode(w); err != nil {
			u.log.Debug("upgrade: state not delivered", "error", err)
		}
		w.Close()
	}()
	go func() {
		r := os.NewFile(uintptr(readyPipe[0]), "upgrade-ready")
		defer r.Close()
		line, err := bufio.NewReader(r).ReadString('\n')
		if err == nil && line != fmt.Sprintf("READY %d\n", pid) {
			err = fmt.Errorf("unexpected readiness message %q", line)
		}
		c.ready <- readyMsg{err: err}
	}()
	return c, nil
}

// exitStatus says how a process ended.
func exitStatus(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return "exit " + strconv.Itoa(ws.ExitStatus())
}
