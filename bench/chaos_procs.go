package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// chaosProc is one child of the chaos run (l4lb or a backend), in its own
// process group, killed with its parent (Pdeathsig). A backend also has a
// control pipe: lines to its stdin, answers from its stdout.
type chaosProc struct {
	name  string
	cmd   *exec.Cmd
	pid   int
	stdin io.WriteCloser
	lines chan string // stdout lines (backends)
	done  chan struct{}
	err   error
	ctlMu sync.Mutex
}

func startChaosProc(name, path string, args []string, logPath string, control bool) (*chaosProc, error) {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd.Stderr = logf
	p := &chaosProc{name: name, cmd: cmd, done: make(chan struct{})}
	var stdout io.ReadCloser
	if control {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
		p.lines = make(chan string, 16)
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	if control {
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				select {
				case p.lines <- sc.Text():
				default: // nobody asked: drop
				}
			}
		}()
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *chaosProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// expect waits for one stdout line equal to want.
func (p *chaosProc) expect(want string, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return nil
			}
			return fmt.Errorf("%s: said %q, want %q", p.name, l, want)
		case <-p.done:
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		case <-t.C:
			return fmt.Errorf("%s: no %q within %v", p.name, want, timeout)
		}
	}
}

func (p *chaosProc) setMode(mode string) error {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if _, err := fmt.Fprintf(p.stdin, "mode %s\n", mode); err != nil {
		return fmt.Errorf("%s: mode %s: %w", p.name, mode, err)
	}
	return p.expect("ok "+mode, 10*time.Second)
}

// kill ends the process group at once and waits for it.
func (p *chaosProc) kill() {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.done
}

// terminate asks for a clean exit, then kills after grace.
func (p *chaosProc) terminate(grace time.Duration) (clean bool) {
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.kill()
		return false
	}
}

// chaosBackendProc is a backend slot: its address stays, its process is
// replaced when a kill fault restarts it.
type chaosBackendProc struct {
	id     int
	addr   string
	port   int
	self   string
	events string
	log    string
	mu     sync.Mutex
	proc   *chaosProc
	pids   []int
}

func (b *chaosBackendProc) start() error {
	p, err := startChaosProc("backend "+strconv.Itoa(b.id), b.self,
		[]string{"-role", "chaos-backend", "-listen", b.addr, "-id", strconv.Itoa(b.id), "-events", b.events},
		b.log, true)
	if err != nil {
		return err
	}
	if err := p.expect(readyLine, 20*time.Second); err != nil {
		p.kill()
		return err
	}
	b.mu.Lock()
	b.proc = p
	b.pids = append(b.pids, p.pid)
	b.mu.Unlock()
	return nil
}

func (b *chaosBackendProc) current() *chaosProc {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}
