package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// cmdDemo starts an echo backend on every backend address of the
// configuration (the shipped config.toml has three) and runs the balancer
// in front of them until Ctrl-C.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "config.toml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		printConfigError(stderr, err)
		fmt.Fprintln(stderr, "l4lb demo: run it from the repository root, or pass -config FILE")
		return 1
	}
	log := newLogger(cfg.Log, stderr)

	var backends []*echoBackend
	defer func() {
		for _, b := range backends {
			b.close()
		}
	}()
	for _, name := range cfg.PoolNames {
		for _, bc := range cfg.Pools[name].Backends {
			b, err := startEcho(bc.Addr)
			if err != nil {
				fmt.Fprintf(stderr, "l4lb demo: echo backend on %s: %v\n", bc.Addr, err)
				return 1
			}
			backends = append(backends, b)
		}
	}
	return serveUntilSignal(cfg, log, func(in *instance) { demoIntro(stdout, cfg, backends) })
}

// demoIntro shows the balancer working (one request per backend) and says
// how to talk to it.
func demoIntro(w io.Writer, cfg *config.Config, backends []*echoBackend) {
	l := cfg.Listeners[0]
	host, port, _ := net.SplitHostPort(l.Bind)
	fmt.Fprintf(w, "\nl4lb demo: %d echo backends, listener %q on %s (pool %q, %s)\n\n",
		len(backends), l.Name, l.Bind, l.Pool, cfg.Pools[l.Pool].Algorithm)
	for i := range backends {
		reply, err := demoRequest(l.Bind, fmt.Sprintf("hello %d", i+1))
		if err != nil {
			fmt.Fprintf(w, "  request %d failed: %v\n", i+1, err)
			continue
		}
		fmt.Fprintf(w, "  request %d -> %s\n", i+1, reply)
	}
	fmt.Fprintf(w, "\nTalk to it:\n  nc %s %s                 (type lines; each comes back from a backend)\n", host, port)
	fmt.Fprintf(w, "  bash -c 'exec 3<>/dev/tcp/%s/%s; echo hi >&3; head -1 <&3'\n", host, port)
	if a := cfg.Admin.Listen; a != "" {
		fmt.Fprintf(w, "  curl -s http://%s/api/v1/pools\n", a)
		fmt.Fprintf(w, "  curl -s http://%s/metrics | grep ^l4lb_\n", a)
		if len(backends) > 0 {
			fmt.Fprintf(w, "  curl -s -X POST http://%s/api/v1/pools/%s/backends/%s/disable\n", a, l.Pool, backends[0].addr)
		}
	}
	fmt.Fprintf(w, "\nCtrl-C stops the demo.\n\n")
}

func demoRequest(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(reply), err
}

// echoBackend answers every line with the line, prefixed by its own
// address, so the demo shows which backend served a connection.
type echoBackend struct {
	addr  string
	ln    net.Listener
	conns sync.WaitGroup
}

func startEcho(addr string) (*echoBackend, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &echoBackend{addr: addr, ln: ln}
	go b.serve()
	return b, nil
}

func (b *echoBackend) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.conns.Go(func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if line != "" {
					fmt.Fprintf(c, "[backend %s] %s", b.addr, line)
				}
				if err != nil {
					return
				}
			}
		})
	}
}

func (b *echoBackend) close() { b.ln.Close() }
