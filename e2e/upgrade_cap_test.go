package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// [global] max_connections holds for the service across an upgrade's
// window, not per process: while the old process still holds client
// connections, the new one counts them against its cap. The old process
// here keeps all of its connections (the new configuration's listener
// feeds another pool, and their pool is gone, so the new process cannot
// carry them on) and drains them: a
// new client past the cap is refused by the new process (connection_cap)
// while the old ones flow on byte for byte, and each old connection that
// closes lets one new client in.
func TestUpgradeHoldsTheConnectionCap(t *testing.T) {
	const capN = 3
	r := startCapped(t, capN)
	chain, listen, adminAddr, old := r.chain, r.listen, r.admin, r.old
	if c := dialTCP(t, listen); admittedBy(t, c, "a") {
		t.Fatalf("a client past max_connections = %d admitted before the upgrade", capN)
	}
	echoEach(t, old, "before the upgrade")

	r.leaveBackendA() // the old connections' pool is gone: they stay with the old process
	oldPID, _ := chain.upgrade(t)
	testnet.Eventually(t, "the new process's adoption line", func() bool {
		return strings.Contains(chain.logText(), logAdopted)
	})
	if processGone(oldPID) {
		t.Fatal("the old process exited: it should still relay its connections")
	}

	// The old process holds capN: every new client is refused.
	const tries = 2 * capN
	for i := range tries {
		if c := dialTCP(t, listen); admittedBy(t, c, "b") {
			t.Fatalf("client %d admitted by the new process while the old one still holds %d connections (max_connections = %d): "+
				"the service serves %d clients at once", i+1, capN, capN, capN+i+1)
		}
		c := old[i%capN]
		echoEach(t, []*net.TCPConn{c}, "while the new process refuses")
	}
	series := `l4lb_client_connections_closed_total{listener="front",reason="connection_cap"}`
	if n := e2eutil.Metric(t, adminAddr, series); n != tries {
		t.Errorf("the new process counts %v clients refused at the cap, want the %d it refused", n, tries)
	}
	echoEach(t, old, "after the refusals")

	// Each old connection that ends lets one new client in.
	var fresh []*net.TCPConn
	for i, c := range old {
		endAndClose(t, c)
		fresh = append(fresh, dialUntilAdmitted(t, listen, fmt.Sprintf("a new client once %d old connection(s) closed", i+1)))
		if c := dialTCP(t, listen); admittedBy(t, c, "b") {
			t.Fatalf("a client past the cap admitted with %d old and %d new connections open", capN-i-1, len(fresh))
		}
		echoEach(t, old[i+1:], "as the old ones close")
		echoEach(t, fresh, "new clients")
	}
	waitOldGone(t, oldPID, time.Now())
	if c := dialTCP(t, listen); admittedBy(t, c, "b") {
		t.Fatalf("a client past the cap admitted after the old process exited")
	}
	// With the old process gone, its count is too: the room is the new
	// process's alone.
	endAndClose(t, fresh[0])
	fresh[0] = dialUntilAdmitted(t, listen, "a new client in the room one of the new process's left")
	echoEach(t, fresh, "the new process alone")
}

// admittedBy reads a client's first bytes: the backend tag's greeting means
// l4lb relayed it; an end of stream (or a reset) with nothing before it,
// that l4lb refused it (the client is then closed).
func admittedBy(t *testing.T, c *net.TCPConn, tag string) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer c.SetReadDeadline(time.Now().Add(flowLifetime))
	got := make([]byte, len(tag)+1)
	n, err := io.ReadFull(c, got)
	switch {
	case err == nil && string(got) == tag+"\n":
		return true
	case n == 0 && (errors.Is(err, io.EOF) || isReset(err)):
		c.Close()
		return false
	}
	t.Fatalf("client %s: read %q, %v; want the greeting %q or a refusal", c.LocalAddr(), got[:n], err, tag+"\n")
	return false
}

// echoEach sends each connection a patterned message and checks it comes
// back byte for byte.
func echoEach(t *testing.T, conns []*net.TCPConn, when string) {
	t.Helper()
	msg := patterned(32 << 10)
	for i, c := range conns {
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("%s: connection %d: write: %v (reset: %v)", when, i, err, isReset(err))
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("%s: connection %d: echo differs at byte %d: %v (reset: %v)", when, i, firstDiff(got, msg), err, isReset(err))
		}
	}
}

// endAndClose half-closes c and waits for l4lb to end the connection
// (the backend's end of stream relayed back), then closes it.
func endAndClose(t *testing.T, c *net.TCPConn) {
	t.Helper()
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close: %d bytes, %v; want the end of stream", len(rest), err)
	}
	c.Close()
}

// dialUntilAdmitted dials the listener until l4lb admits a client (the room
// a closed connection left may take a moment to be counted), and returns
// it.
func dialUntilAdmitted(t *testing.T, listen, what string) *net.TCPConn {
	t.Helper()
	var c *net.TCPConn
	testnet.Eventually(t, what, func() bool {
		c = dialTCP(t, listen)
		if admittedBy(t, c, "b") {
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	return c
}

// Two upgrades in a row while the first process still drains: the middle
// one, with nothing of its own left, stays until the first holds no
// connection, reporting that count, so the newest process goes on
// refusing clients past max_connections; once the first process's
// connections close, both old processes exit and the room is the newest
// one's.
func TestUpgradeHoldsTheConnectionCapTwice(t *testing.T) {
	const capN = 2
	r := startCapped(t, capN)
	chain, listen, old := r.chain, r.listen, r.old

	r.leaveBackendA() // the first process keeps its connections
	first, _ := chain.upgrade(t)
	testnet.Eventually(t, "the middle process's adoption line", func() bool {
		return strings.Count(chain.logText(), logAdopted) == 1
	})
	middle, _ := chain.upgrade(t)
	testnet.Eventually(t, "the middle process's line that it waits for the first", func() bool {
		return strings.Contains(chain.logText(), "upgrade: exiting once the previous process's connections are closed")
	})
	if processGone(first) || processGone(middle) {
		t.Fatalf("an old process exited (first: %v, middle: %v) while the first still holds its connections", processGone(first), processGone(middle))
	}
	for i := range 2 * capN {
		if c := dialTCP(t, listen); admittedBy(t, c, "b") {
			t.Fatalf("client %d admitted by the newest process while the first still holds %d connections (max_connections = %d)", i+1, capN, capN)
		}
	}
	echoEach(t, old, "after the second upgrade")

	for _, c := range old {
		endAndClose(t, c)
	}
	closed := time.Now()
	waitOldGone(t, first, closed)
	waitOldGone(t, middle, closed)
	var fresh []*net.TCPConn
	for i := range capN {
		fresh = append(fresh, dialUntilAdmitted(t, listen, fmt.Sprintf("new client %d once the old processes are gone", i+1)))
	}
	if c := dialTCP(t, listen); admittedBy(t, c, "b") {
		t.Fatal("a client past the cap admitted by the newest process alone")
	}
	echoEach(t, fresh, "the newest process alone")
}

// cappedRig is an l4lb with max_connections = capN in front of backend
// a, holding capN clients admitted there; backend b waits for the
// configuration that moves the listener to a pool of b alone.
type cappedRig struct {
	chain         *upgradeChain
	listen, admin string
	old           []*net.TCPConn
	leaveBackendA func() // the listener feeds pool q of b alone from now; p is gone
}

func startCapped(t *testing.T, capN int) *cappedRig {
	t.Helper()
	testnet.CheckLeaks(t)
	a := testnet.StartBackend(t, "a", "")
	b := testnet.StartBackend(t, "b", "")
	path, listen, adminAddr := e2eutil.WriteConfig(t, "", nil, fmt.Sprintf("[global]\nmax_connections = %d", capN))
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	installBytes(t, fmt.Appendf(append([]byte(nil), text...), "[pool.p.health]\nenabled = false\n%s", backendTOML(a.Addr)), path, 0o644)
	// A pool of another name: a process adopts a connection to a backend
	// that left its pool (pool.Departed), but not one whose pool is gone.
	moved := strings.ReplaceAll(strings.Replace(string(text), `pool = "p"`, `pool = "q"`, 1), "[pool.p]", "[pool.q]")
	leave := func() {
		installBytes(t, fmt.Appendf([]byte(moved), "[pool.q.health]\nenabled = false\n[[pool.q.backend]]\naddr = %q\n", b.Addr), path, 0o644)
	}
	r := &cappedRig{chain: startChain(t, l4lbBin, path), listen: listen, admin: adminAddr,
		old: make([]*net.TCPConn, capN), leaveBackendA: leave}
	for i := range r.old {
		r.old[i] = dialTCP(t, listen)
		if !admittedBy(t, r.old[i], "a") {
			t.Fatalf("client %d of %d refused before the upgrade", i+1, capN)
		}
	}
	return r
}
