// Package demo is what l4lb demo runs beside the balancer: echo backends
// that say which backend answered, and an introduction that shows them
// answering through the balancer and says how to talk to it.
package demo

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

// Intro shows the balancer working (one request per backend of the
// first TCP listener's pool, one datagram per backend of the first UDP
// listener's) and says how to talk to it.
func Intro(w io.Writer, cfg *config.Config, backends []*Backend) {
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
			reply, err := request(tcp.Bind, fmt.Sprintf("hello %d", i+1))
			if err != nil {
				fmt.Fprintf(w, "  request %d failed: %v\n", i+1, err)
				continue
			}
			fmt.Fprintf(w, "  request %d -> %s\n", i+1, reply)
		}
	}
	if udp != nil {
		for i := range cfg.Pools[udp.Pool].Backends {
			reply, err := datagram(udp.Bind, fmt.Sprintf("hello %d", i+1))
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
		fmt.Fprintf(w, "  http://%s/                 (in a browser: the status page)\n", a)
		fmt.Fprintf(w, "  curl -s http://%s/api/v1/pools\n", a)
		fmt.Fprintf(w, "  curl -s http://%s/metrics | grep ^l4lb_\n", a)
		if tcp != nil && len(cfg.Pools[tcp.Pool].Backends) > 0 {
			fmt.Fprintf(w, "  curl -s -X POST http://%s/api/v1/pools/%s/backends/%s/disable\n", a, tcp.Pool, cfg.Pools[tcp.Pool].Backends[0].Addr)
		}
	}
	fmt.Fprintf(w, "\nCtrl-C stops the demo.\n\n")
}

func request(addr, line string) (string, error) {
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

// datagram sends line as one datagram from a socket of its own (a new
// client port: a new session) and returns the reply datagram.
func datagram(addr, line string) (string, error) {
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

// Backend answers every line (TCP) or datagram (UDP) with itself and
// the backend's own address, so the demo shows which backend served a
// client.
type Backend struct {
	addr  string
	ln    net.Listener   // TCP
	pc    net.PacketConn // UDP
	conns sync.WaitGroup
}

// StartTCP starts a TCP echo backend on addr.
func StartTCP(addr string) (*Backend, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &Backend{addr: addr, ln: ln}
	go b.serve()
	return b, nil
}

func (b *Backend) serve() {
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

// StartUDP starts a UDP echo backend on addr: it answers each datagram with the datagram followed by
// " [backend ADDR]": a reply starts with what was sent, as the shipped
// config's send-expect check ("ping" in, "ping..." back) wants.
func StartUDP(addr string) (*Backend, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	b := &Backend{addr: addr, pc: pc}
	b.conns.Go(b.serveUDP)
	return b, nil
}

func (b *Backend) serveUDP() {
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

// Close stops the backend.
func (b *Backend) Close() {
	if b.ln != nil {
		b.ln.Close()
	}
	if b.pc != nil {
		b.pc.Close()
	}
}
