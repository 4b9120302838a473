package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// The naive Go baseline: io.Copy both ways between two *net.TCPConn (which
// Go turns into splice(2) with a pipe per direction held for the whole
// connection), round robin over targets, no health, no retries.

// mapFlag collects -map LISTEN=TARGET[|TARGET...] values.
type mapFlag []string

func (m *mapFlag) String() string     { return strings.Join(*m, " ") }
func (m *mapFlag) Set(v string) error { *m = append(*m, v); return nil }

func runGoproxyRole(args []string) error {
	fs := flag.NewFlagSet("goproxy", flag.ContinueOnError)
	var maps mapFlag
	fs.Var(&maps, "map", "LISTEN=TARGET[|TARGET...]; repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(maps) == 0 {
		return errors.New("goproxy: need -map")
	}
	for _, m := range maps {
		listen, targets, ok := strings.Cut(m, "=")
		if !ok {
			return fmt.Errorf("goproxy: bad -map %q", m)
		}
		ts := strings.Split(targets, "|")
		for _, t := range append([]string{listen}, ts...) {
			if err := checkLoopback(t); err != nil {
				return fmt.Errorf("goproxy: %w", err)
			}
		}
		l, err := listenLoopback(listen)
		if err != nil {
			return fmt.Errorf("goproxy: %w", err)
		}
		go goproxyServe(l, ts)
	}
	fmt.Fprintln(os.Stdout, readyLine)
	select {}
}

func goproxyServe(l *net.TCPListener, targets []string) {
	var next atomic.Uint64
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			continue
		}
		t := targets[(next.Add(1)-1)%uint64(len(targets))]
		go goproxyConn(c, t)
	}
}

func goproxyConn(client *net.TCPConn, target string) {
	up, err := dialLoopback(target)
	if err != nil {
		client.Close()
		return
	}
	var wg sync.WaitGroup
	half := func(dst, src *net.TCPConn) {
		_, _ = io.Copy(dst, src)
		_ = dst.CloseWrite()
	}
	wg.Go(func() { half(up, client) })
	wg.Go(func() { half(client, up) })
	wg.Wait()
	client.Close()
	up.Close()
}

func goproxySystem() systemSpec {
	return systemSpec{
		name: "goproxy", kind: KindPeer, fdsPerConn: 6, noUDP: "the naive Go proxy relays TCP only",
		noSNI: "the naive Go proxy relays bytes without reading them: no SNI routing",
		about: "naive Go io.Copy proxy (splice, 2 pipes held per connection), round robin, no health checks or retries",
		start: func(h *harness, s *system) (*child, error) {
			args := []string{"-role", "goproxy"}
			for _, r := range s.routes {
				if r.udp != udpNone {
					continue // noUDP: placeSystem gives it none
				}
				args = append(args, "-map", r.listen+"="+strings.Join(r.backends, "|"))
			}
			return h.sup.start(spawnSpec{
				name: s.spec.name, path: h.self, args: args, cred: h.cred, env: h.goEnv(nil),
				waitReady: true, logPath: s.file("goproxy.log"),
			})
		},
	}
}
