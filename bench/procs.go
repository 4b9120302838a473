package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrExited means a child died before it became ready.
var ErrExited = errors.New("child exited early")

// readyLine is what the harness's own roles print once they listen.
const readyLine = "ready"

// spawnSpec describes one child process.
type spawnSpec struct {
	name string
	path string
	args []string
	env  []string // added to the harness's environment
	cred *syscall.Credential
	// waitReady waits for readyLine on the child's stdout.
	waitReady bool
	logPath   string // stderr (and stdout after ready) go here
}

// child is one started process; its pid is also its process group, so
// stopping it also stops what it forked (nginx workers).
type child struct {
	name string
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
	err  error
}

// supervisor owns every process the harness starts and stops them by pid.
type supervisor struct {
	mu       sync.Mutex
	children map[int]*child
}

func newSupervisor() *supervisor { return &supervisor{children: map[int]*child{}} }

func (s *supervisor) start(spec spawnSpec) (*child, error) {
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = append(os.Environ(), spec.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: spec.cred,
	}
	var logw io.Writer = io.Discard
	if spec.logPath != "" {
		f, err := os.Create(spec.logPath)
		if err != nil {
			return nil, fmt.Errorf("%s: log: %w", spec.name, err)
		}
		defer f.Close() // the child keeps its own copy
		logw = f
	}
	cmd.Stderr = logw
	var stdout io.ReadCloser
	if spec.waitReady {
		var err error
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, fmt.Errorf("%s: %w", spec.name, err)
		}
	} else {
		cmd.Stdout = logw
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start: %w", spec.name, err)
	}
	c := &child{name: spec.name, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	s.mu.Lock()
	s.children[c.pid] = c
	s.mu.Unlock()
	ready := make(chan struct{})
	if spec.waitReady {
		go func() {
			sc := bufio.NewScanner(stdout)
			signalled := false
			for sc.Scan() {
				if !signalled && strings.TrimSpace(sc.Text()) == readyLine {
					close(ready)
					signalled = true
				}
			}
		}()
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	if !spec.waitReady {
		return c, nil
	}
	select {
	case <-ready:
		return c, nil
	case <-c.done:
		s.forget(c)
		return nil, fmt.Errorf("%s: %w: %v", spec.name, ErrExited, c.err)
	case <-time.After(10 * time.Second):
		s.kill(c)
		return nil, fmt.Errorf("%s: not ready after 10s", spec.name)
	}
}

func (s *supervisor) forget(c *child) {
	s.mu.Lock()
	delete(s.children, c.pid)
	s.mu.Unlock()
}

// alive reports whether the child has not exited yet.
func (c *child) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// stop asks the child's process group to terminate, then kills it.
func (s *supervisor) stop(c *child) {
	if c == nil {
		return
	}
	_ = syscall.Kill(-c.pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		<-c.done
	}
	// Workers that outlived their master are still in the group.
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	s.forget(c)
}

// kill ends the child's process group at once (the failover scenario's
// "backend died").
func (s *supervisor) kill(c *child) {
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	<-c.done
	s.forget(c)
}

// stopAll stops every child still registered, in parallel.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	list := make([]*child, 0, len(s.children))
	for _, c := range s.children {
		list = append(list, c)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range list {
		wg.Go(func() { s.stop(c) })
	}
	wg.Wait()
}
