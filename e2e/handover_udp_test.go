package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A UDP session survives an upgrade: the client keeps its session (the
// backend sees the same source port from l4lb before and after, so the
// session's backend socket crossed to the new process), and every
// datagram the backend sends the client meanwhile, one each 10 ms from
// before the upgrade until after the old process is gone, reaches the
// client, in order. An l4lb that drains instead ends its UDP sessions when
// the upgrade's drain starts: the backend's datagrams are lost, and the
// client's next one opens a new session from another port.
func TestHandoverKeepsUDPSessions(t *testing.T) {
	testnet.CheckLeaks(t)
	backend := startUDPPeer(t)
	listen := testnet.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, fmt.Appendf(nil, `[global]
shutdown_timeout = "2s"
[[listener]]
name = "dgram"
bind = %q
protocol = "udp"
pool = "u"
[pool.u]
[pool.u.health]
enabled = false
[[pool.u.backend]]
addr = %q
`, listen, backend.conn.LocalAddr()), 0o644); err != nil {
		t.Fatal(err)
	}
	chain := startChain(t, l4lbBin, path)

	client := udpClient(t, listen)
	session := backend.sessionOf(t, client, "hello")
	received := receiveNumbered(t, client)
	stopPush := backend.push(t, session)
	received.waitPast(t, 5, "before the upgrade")

	old, served := chain.upgrade(t)
	waitOldGone(t, old, served)
	if next := received.highest() + 5; !testnet.WaitUntil(20*time.Second, func() bool { return received.highest() >= next }) {
		after := backend.sessionOf(t, client, "after")
		t.Fatalf("after the old process was gone no datagram of the backend's reached the client (%d arrived before); the client's next datagram came from %v, before from %v",
			received.count(), after, session)
	}
	last := stopPush()
	received.waitPast(t, last, "the last the backend sent")
	if missing, out := received.check(last); len(missing) > 0 || out != "" {
		t.Fatalf("of the backend's %d datagrams the client missed %d %v; %s", last+1, len(missing), missing, out)
	}
	if after := backend.sessionOf(t, client, "after"); after.String() != session.String() {
		t.Fatalf("after the upgrade the backend sees the client's datagrams from %v, before from %v: a new session, the old one lost", after, session)
	}
	checkHandedOver(t, chain.logText(), 1, 0, 1)
	t.Logf("%d datagrams from the backend reached the client across the upgrade, all of them, in order; the session kept port %d", last+1, session.Port)
}

// udpPeer is a UDP backend the test drives: it reports where each
// datagram came from and sends numbered datagrams to a session.
type udpPeer struct {
	conn *net.UDPConn
	got  chan udpDatagram
}

type udpDatagram struct {
	from    *net.UDPAddr
	payload string
}

func startUDPPeer(t *testing.T) *udpPeer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &udpPeer{conn: c, got: make(chan udpDatagram, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return // closed
			}
			select {
			case p.got <- udpDatagram{from, string(buf[:n])}:
			default:
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return p
}

// sessionOf sends msg from client (again, until it arrives) and returns
// the address l4lb's session sent it from.
func (p *udpPeer) sessionOf(t *testing.T, client *net.UDPConn, msg string) *net.UDPAddr {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if _, err := client.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		resend := time.After(200 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case d := <-p.got:
				if d.payload == msg {
					return d.from
				}
			case <-resend:
				waiting = false
			case <-deadline:
				t.Fatalf("the backend never received %q through l4lb", msg)
			}
		}
	}
}

// push sends "N" to session every 10 ms until the returned func is
// called, which returns the last N sent.
func (p *udpPeer) push(t *testing.T, session *net.UDPAddr) func() int {
	t.Helper()
	stop := make(chan struct{})
	last := make(chan int, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			if _, err := p.conn.WriteToUDP([]byte(strconv.Itoa(n)), session); err != nil {
				t.Errorf("backend: send %d: %v", n, err)
			}
			select {
			case <-stop:
				last <- n
				return
			case <-tick.C:
			}
		}
	}()
	stopped := sync.OnceValue(func() int { close(stop); return <-last })
	t.Cleanup(func() { stopped() })
	return stopped
}

// numbered is what the client received of the backend's numbered
// datagrams, in order of arrival.
type numbered struct {
	mu  sync.Mutex
	got []int
}

// receiveNumbered reads client's datagrams until the test ends.
func receiveNumbered(t *testing.T, client *net.UDPConn) *numbered {
	t.Helper()
	r := &numbered{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			client.SetReadDeadline(time.Now().Add(time.Minute))
			n, err := client.Read(buf)
			if err != nil {
				return // closed, or a minute without one
			}
			if v, err := strconv.Atoi(string(buf[:n])); err == nil {
				r.mu.Lock()
				r.got = append(r.got, v)
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { client.Close(); <-done })
	return r
}

func (r *numbered) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// highest is the highest number received, -1 before any.
func (r *numbered) highest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := -1
	for _, v := range r.got {
		h = max(h, v)
	}
	return h
}

// waitPast waits until a datagram numbered n or above has arrived.
func (r *numbered) waitPast(t *testing.T, n int, what string) {
	t.Helper()
	testnet.Eventually(t, fmt.Sprintf("the backend's datagram %d to reach the client (%s)", n, what), func() bool {
		return r.highest() >= n
	})
}

// check returns the numbers 0..last never received, and what arrived out
// of order or twice ("" if nothing).
func (r *numbered) check(last int) (missing []int, out string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make([]int, last+1)
	var bad []string
	prev := -1
	for _, v := range r.got {
		if v <= prev {
			bad = append(bad, fmt.Sprintf("%d after %d", v, prev))
		}
		prev = v
		if v <= last {
			seen[v]++
		}
	}
	for v, n := range seen {
		if n == 0 {
			missing = append(missing, v)
		}
	}
	if len(bad) > 0 {
		out = "out of order or twice: " + strings.Join(bad[:min(len(bad), 20)], ", ")
	}
	return missing, out
}
