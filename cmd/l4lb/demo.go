package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// cmdDemo starts an echo backend on every backend address of the
// configuration (the shipped config.toml has three TCP ones and three UDP
// ones), of its pool's protocol, and runs the balancer in front of them
// until Ctrl-C.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "[-config FILE]", "Start local echo backends (TCP and UDP) and the balancer on FILE; Ctrl-C stops it.", stderr)
	path := fs.String("config", "config.toml", "the configuration `FILE`")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
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
		p := cfg.Pools[name]
		for _, bc := range p.Backends {
			start := startEcho
			if p.Protocol == config.ProtocolUDP {
				start = startUDPEcho
			}
			b, err := start(bc.Addr)
			if err != nil {
				fmt.Fprintf(stderr, "l4lb demo: %s echo backend on %s: %v\n", p.Protocol, bc.Addr, err)
				return 1
			}
			backends = append(backends, b)
		}
	}
	return serveUntilSignal(cfg, *path, log, func(in *instance) { demoIntro(stdout, cfg, backends) })
}

// demoIntro shows the balancer working (one request per backend of the
// first TCP listener's pool, one datagram per backend of the first UDP
// listener's) and says how to talk to it.
func demoIntro(w io.Writer, cfg *config.Config, backends []*echoBackend) {
	var tcp, udp *config.Listener
	for i := range cfg.Listeners {
		switch l := &cfg.Listeners[i]; {
		case l.Protocol == config.ProtocolUDP && udp == nil:
			udp = l
		case l.Protocol != config.ProtocolUDP && tcp == nil:
			tcp = l
		}
	}
	fmt.Fprintf(w, "\nl4lb demo: %d echo backends", len(backends))
	for _, l := range []*config.Listener{tcp, udp} {
		if l != nil {
			fmt.Fprintf(w, ", %s listener %q on %s (pool %q, %s)", l.Protocol, l.Name, l.Bind, l.Pool, cfg.Pools[l.Pool].Algorithm)
		}
	}
	fmt.Fprintf(w, "\n\n")
	if tcp != nil {
		for i := range cfg.Pools[tcp.Pool].Backends {
			reply, err := demoRequest(tcp.Bind, fmt.Sprintf("hello %d", i+1))
			if err != nil {
				fmt.Fprintf(w, "  request %d failed: %v\n", i+1, err)
				continue
			}
			fmt.Fprintf(w, "  request %d -> %s\n", i+1, reply)
		}
	}
	if udp != nil {
		for i := range cfg.Pools[udp.Pool].Backends {
			reply, err := demoDatagram(udp.Bind, fmt.Sprintf("hello %d", i+1))
			if err != nil {
				fmt.Fprintf(w, "  datagram %d failed: %v\n", i+1, err)
				continue
			}
			fmt.Fprintf(w, "  datagram %d -> %s\n", i+1, reply)
		}
	}
	fmt.Fprintf(w, "\nTalk to it:\n")
	if tcp != nil {
		host, port, _ := net.SplitHostPort(tcp.Bind)
		fmt.Fprintf(w, "  nc %s %s                 (type lines; each comes back from a backend)\n", host, port)
		fmt.Fprintf(w, "  bash -c 'exec 3<>/dev/tcp/%s/%s; echo hi >&3; head -1 <&3'\n", host, port)
	}
	if udp != nil {
		host, port, _ := net.SplitHostPort(udp.Bind)
		fmt.Fprintf(w, "  echo hi | nc -u -w1 %s %s   (one datagram; each new client port is a session, sent to the next backend)\n", host, port)
	}
	if a := cfg.Admin.Listen; a != "" {
		fmt.Fprintf(w, "  curl -s http://%s/api/v1/pools\n", a)
		fmt.Fprintf(w, "  curl -s http://%s/metrics | grep ^l4lb_\n", a)
		if tcp != nil && len(cfg.Pools[tcp.Pool].Backends) > 0 {
			fmt.Fprintf(w, "  curl -s -X POST http://%s/api/v1/pools/%s/backends/%s/disable\n", a, tcp.Pool, cfg.Pools[tcp.Pool].Backends[0].Addr)
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

// demoDatagram sends line as one datagram from a socket of its own (a new
// client port: a new session) and returns the reply datagram.
func demoDatagram(addr, line string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	return strings.TrimSpace(string(buf[:n])), err
}

// echoBackend answers every line (TCP) or datagram (UDP) with itself and
// the backend's own address, so the demo shows which backend served a
// client.
type echoBackend struct {
	addr  string
	ln    net.Listener   // TCP
	pc    net.PacketConn // UDP
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

// startUDPEcho answers each datagram with the datagram followed by
// " [backend ADDR]": a reply starts with what was sent, as the shipped
// config's send-expect check ("ping" in, "ping..." back) wants.
func startUDPEcho(addr string) (*echoBackend, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	b := &echoBackend{addr: addr, pc: pc}
	b.conns.Go(b.serveUDP)
	return b, nil
}

func (b *echoBackend) serveUDP() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := b.pc.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		msg := strings.TrimSuffix(string(buf[:n]), "\n")
		b.pc.WriteTo(fmt.Appendf(nil, "%s [backend %s]\n", msg, b.addr), from)
	}
}

func (b *echoBackend) close() {
	if b.ln != nil {
		b.ln.Close()
	}
	if b.pc != nil {
		b.pc.Close()
	}
}
