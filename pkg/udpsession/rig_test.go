package udpsession

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/loopguard"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// udpRig is one UDP listener on its own loops, as pkg/server wires it.
type udpRig struct {
	t     *testing.T
	loops []*Loop
	front *Front
	pool  *pool.Pool
	addr  string
	bound *listener.UDPSockets // what was bound, its descriptors the loops'
}

type udpRigOpts struct {
	bind     string // "": 127.0.0.1:0
	loops    int    // 0: one
	retries  int
	settings func(*Settings)    // changes the listener's settings last
	pool     func(*config.Pool) // changes the pool's config last
	// sameSockets: the rig's loops serve duplicates of that rig's
	// sockets, as the process taking over from it in an upgrade does.
	sameSockets *udpRig
	// access is where the loops find the access log; nil: none.
	access *accesslog.Sink
}

func newUDPRig(t *testing.T, backends []string, o udpRigOpts) *udpRig {
	t.Helper()
	testnet.CheckLeaks(t)
	if o.loops <= 0 {
		o.loops = 1
	}
	if o.sameSockets != nil {
		o.loops = len(o.sameSockets.loops)
	}
	pc := config.DefaultPool("u")
	pc.Protocol = config.ProtocolUDP
	pc.Algorithm = config.AlgorithmRoundRobin
	pc.Retries = o.retries
	pc.Health.Enabled = false
	pc.Breaker.Failures = 1_000_000 // these tests are about the loop, not the breaker
	for _, a := range backends {
		b := config.DefaultBackend()
		b.Addr = a
		pc.Backends = append(pc.Backends, b)
	}
	if o.pool != nil {
		o.pool(pc)
	}
	r := &udpRig{t: t}
	// A drain's deadline cuts through the loops, as cmd/l4lb wires it.
	cut := func(b *pool.Backend) {
		for _, l := range r.loops {
			l.CutBackend(b)
		}
	}
	p, err := pool.New(pc, pool.Deps{Store: breaker.NewMemoryStore(nil), CutBackend: cut})
	if err != nil {
		t.Fatal(err)
	}
	set := Settings{Pool: p, SessionTimeout: time.Minute, MaxSessions: 1000}
	if o.settings != nil {
		o.settings(&set)
	}
	f := NewFront("u", set)
	if o.bind == "" {
		o.bind = "127.0.0.1:0"
	}
	var socks *listener.UDPSockets
	if o.sameSockets != nil {
		socks = o.sameSockets.dupSockets()
	} else if socks, err = listener.BindUDP("u", o.bind, o.loops); err != nil {
		t.Fatal(err)
	}
	guard := loopguard.New()
	r.front, r.pool, r.addr, r.bound = f, p, socks.Addr.String(), socks
	local := socks.Addr.AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	guard.ListenOn(local.Port())
	started := false
	t.Cleanup(func() {
		socks.Close() // what no loop took
		for _, l := range r.loops {
			if started {
				l.r.Stop()
				l.r.Wait()
			} else {
				l.r.Discard()
			}
		}
		if !started {
			return
		}
		if n := f.Sessions.Load(); n != 0 {
			t.Errorf("%d sessions counted open after the loops stopped", n)
		}
		if n := f.sockets.Load(); n != 0 {
			t.Errorf("%d backend sockets counted after the loops stopped", n)
		}
		for _, b := range p.Backends() {
			if n := b.Active(); n != 0 {
				t.Errorf("backend %s still counts %d sessions after the loops stopped", b.Addr, n)
			}
		}
	})
	for i := range o.loops {
		rl, err := reactor.New(reactor.Config{ID: i})
		if err != nil {
			t.Fatal(err)
		}
		l := New(rl, guard)
		l.UseAccessLog(o.access)
		r.loops = append(r.loops, l)
		if err := l.AddListener(socks.FDs[i], f, local, socks.Wildcard); err != nil {
			t.Fatal(err)
		}
		socks.FDs[i] = -1 // the loop owns it now
	}
	f.Publish()
	for _, l := range r.loops {
		l.r.Start()
	}
	started = true
	return r
}

// client is one client socket (one source port) of the rig's listener.
func (r *udpRig) client() *net.UDPConn {
	r.t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(r.addr)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// on runs f on loop l and waits for it.
func (r *udpRig) on(l *Loop, f func()) {
	r.t.Helper()
	if !l.r.Do(f) {
		r.t.Fatal("the loop stopped")
	}
}

// replyWithin sends p once and returns the one reply, or an error.
func replyWithin(c *net.UDPConn, p []byte, wait time.Duration) ([]byte, error) {
	if _, err := c.Write(p); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<16)
	c.SetReadDeadline(time.Now().Add(wait))
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// refusingAddr is a port on 127.0.0.1 nothing listens on: datagrams to it
// draw ICMP port unreachable.
func refusingAddr(t *testing.T) string { return testnet.FreeAddr(t) }

// rmemAlloc is the memory a socket's received datagrams hold (SO_MEMINFO):
// it grows with every datagram queued.
func rmemAlloc(fd int) (uint32, error) {
	var m [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(m))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&m[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return m[unix.SK_MEMINFO_RMEM_ALLOC], nil
}

// sendQueued sends p from conn to to, and waits until fd (the receiving
// socket) has it queued.
func sendQueued(conn *net.UDPConn, to *net.UDPAddr, fd int, p []byte) error {
	before, err := rmemAlloc(fd)
	if err != nil {
		return err
	}
	if _, err := conn.WriteToUDP(p, to); err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if now, err := rmemAlloc(fd); err != nil || now > before {
			return err
		}
	}
	return errors.New("the datagram never reached the socket")
}

// dupSockets duplicates the socket each loop of r serves, as the process
// taking over from r in an upgrade holds them.
func (r *udpRig) dupSockets() *listener.UDPSockets {
	r.t.Helper()
	socks := &listener.UDPSockets{Name: r.bound.Name, Addr: r.bound.Addr, Wildcard: r.bound.Wildcard}
	for _, l := range r.loops {
		r.on(l, func() {
			l.EachListener(func(fd int, _ string) {
				dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
				if err != nil {
					r.t.Error(err)
					return
				}
				socks.FDs = append(socks.FDs, dup)
			})
		})
	}
	if len(socks.FDs) != len(r.loops) {
		socks.Close()
		r.t.Fatalf("%d sockets duplicated from %d loops", len(socks.FDs), len(r.loops))
	}
	return socks
}
