package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The longlived scenario's client processes (driven over stdin/stdout)
// and how the harness sees a proxy listening inside a namespace.

// llClientProc is one llclient process and its reply lines.
type llClientProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan llReply
	done  chan struct{}
}

func startLLClient(ns, self, logPath string, args []string) (*llClientProc, error) {
	argv := inNS(ns, append([]string{self, "-role", "llclient"}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &llClientProc{cmd: cmd, stdin: stdin, lines: make(chan llReply, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var r llReply
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				p.lines <- r
			}
		}
		close(p.lines)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *llClientProc) send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// await returns the next reply, which must be op's.
func (p *llClientProc) await(op string, within time.Duration) (llReply, error) {
	select {
	case r, ok := <-p.lines:
		if !ok {
			return r, errors.New("llclient exited (see its log)")
		}
		if r.Error != "" {
			return r, fmt.Errorf("llclient %s: %s", op, r.Error)
		}
		if r.Op != op {
			return r, fmt.Errorf("llclient: %s reply to %s", r.Op, op)
		}
		return r, nil
	case <-time.After(within):
		return llReply{}, fmt.Errorf("llclient: no %s reply within %v", op, within)
	}
}

// stop asks the client to quit (closing its connections), then kills it.
func (p *llClientProc) stop() {
	_ = p.send("quit")
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// allClients sends line (unless "") to every client and collects op's
// replies.
func allClients(ps []*llClientProc, line, op string, within time.Duration) ([]llReply, error) {
	for _, p := range ps {
		if line == "" {
			break
		}
		if err := p.send(line); err != nil {
			return nil, err
		}
	}
	out := make([]llReply, 0, len(ps))
	var firstErr error
	for _, p := range ps {
		r, err := p.await(op, within)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out = append(out, r)
	}
	return out, firstErr
}

// listensIn reports whether /proc/net/tcp text (of a process inside the
// namespace) has a listening socket on ap.
func listensIn(procNetTCP string, ap netip.AddrPort) bool {
	a4 := ap.Addr().As4()
	// /proc/net/tcp prints the address as the in-memory u32 in hex: on
	// little-endian machines the bytes reversed.
	want := strings.ToUpper(hex.EncodeToString([]byte{a4[3], a4[2], a4[1], a4[0]})) + ":" + fmt.Sprintf("%04X", ap.Port())
	for line := range strings.SplitSeq(procNetTCP, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == want && f[3] == "0A" {
			return true
		}
	}
	return false
}

// waitListening waits until pid's namespace has a listener on addr, or
// the process dies, or 10 s pass.
func waitListening(c *child, addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !c.alive() {
			return fmt.Errorf("%s exited: %v", c.name, c.err)
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(c.pid) + "/net/tcp")
		if err == nil && listensIn(string(b), ap) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: not listening on %s after 10s", c.name, addr)
}
