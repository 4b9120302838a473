package server

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
)

// The hand-over between two servers of one process (as two processes'
// would be, minus the unix socket): one detaches, the other finds each
// connection's listener, pool and backend among its own and adopts it;
// what it has no home for is refused, and adopted back by the first.

func echoVia(t *testing.T, c net.Conn, backend net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	backend.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(backend, got); err != nil || string(got) != msg {
		t.Fatalf("backend read %q, %v; want %q", got, err, msg)
	}
	backend.Write(got)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("client read %q, %v; want %q", got, err, msg)
	}
}

// openThrough opens n connections through addr to the taker k, each
// proven by one echo, all closed when the test ends.
func openThrough(t *testing.T, addr string, k *testnet.Taker, n int) (clients, backends []net.Conn) {
	t.Helper()
	for range n {
		c, err := net.DialTimeout("tcp", addr, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b := k.Next(t)
		t.Cleanup(func() { c.Close(); b.Close() })
		echoVia(t, c, b, "before")
		clients, backends = append(clients, c), append(backends, b)
	}
	return clients, backends
}

func TestServerHandsConnectionsToAnother(t *testing.T) {
	k := testnet.StartTaker(t)
	// No health checks: the taker would hand their connections to the test.
	const noChecks = "[pool.p.health]\nenabled = false"
	old := startLB(t, poolTOML(t, "round-robin", []string{k.Addr}, noChecks), 0)
	next := startLB(t, poolTOML(t, "round-robin", []string{k.Addr}, noChecks), 0)
	other := startLB(t, strings.Replace(poolTOML(t, "round-robin", []string{k.Addr}, noChecks), `name = "front"`, `name = "elsewhere"`, 1), 0)

	const n = 6
	clients, backends := openThrough(t, old.addr, k, n)

	// A server with no listener of that name refuses them all: they come
	// back to the old one, to stay.
	b := &flow.Batch{}
	if pending := old.server.DetachFlows(b); pending != 0 || len(b.Relays) != n {
		t.Fatalf("detached %d relays, %d pending; want %d, 0", len(b.Relays), pending, n)
	}
	run, refused := other.server.AdoptFlows(b, false)
	run()
	if len(refused.Relays) != n {
		t.Fatalf("a server without listener front refused %d of %d", len(refused.Relays), n)
	}
	run, refused = old.server.AdoptFlows(b, true)
	run()
	if refused.Len() != 0 {
		t.Fatalf("the old server refused its own connections back: %+v", refused)
	}
	for i := range clients {
		echoVia(t, clients[i], backends[i], "still on the old one")
	}
	if b2 := (&flow.Batch{}); old.server.DetachFlows(b2) != 0 || b2.Len() != 0 {
		t.Fatalf("connections taken back to stay were detached again: %d", b2.Len())
	}

	// Moved for real: served by the next server, counted there.
	for i := range clients {
		clients[i].Close()
		backends[i].Close()
	}
	if !testnet.WaitUntil(20*time.Second, func() bool { return old.server.Active() == 0 }) {
		t.Fatalf("the old server still holds %d", old.server.Active())
	}
	clients, backends = openThrough(t, old.addr, k, n)
	b = &flow.Batch{}
	old.server.DetachFlows(b)
	handTo(t, next, b)
	for i := range clients {
		echoVia(t, clients[i], backends[i], "on the next one")
	}
	if got := next.server.Active(); got != n {
		t.Errorf("the next server counts %d connections, want %d", got, n)
	}
	if got := next.pools["p"].Backends()[0].Active(); got != n {
		t.Errorf("its backend counts %d, want %d", got, n)
	}
}

// The connections an upgrade's old process still holds count against
// max_connections here: with the cap at 2 and one held there, one client
// is served and the next refused; once the old process holds none, the
// room is this process's again. Holding, what this process reports to
// its own successor, counts both.
func TestConnectionCapCountsThePreviousProcess(t *testing.T) {
	noLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	l := startLB(t, poolTOML(t, "round-robin", []string{b.Addr}, ""), 2)
	l.server.HeldElsewhere(1)
	c := dial(t, l.addr)
	defer c.Close()
	if tag, _ := bufio.NewReader(c).ReadString('\n'); tag != "b\n" {
		t.Fatal("the client within the cap not served")
	}
	over := dial(t, l.addr)
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the client past the cap (one held by the old process) read %d bytes, %v; want a clean close", n, err)
	}
	if got := l.listener("front").Rejected; got != 1 {
		t.Fatalf("%d refused, want 1 (at the cap)", got)
	}
	if n := l.server.Holding(); n != 2 {
		t.Fatalf("holding %d, want 2 (one here, one there)", n)
	}
	l.server.HeldElsewhere(0)
	if tag, err := testnet.Hello(l.addr, ""); err != nil || tag != "b" {
		t.Fatalf("once the old process holds none: %q, %v", tag, err)
	}
}

// passed is b as SCM_RIGHTS passes it to another process: the same
// files, new descriptors.
func passed(t *testing.T, b *flow.Batch) *flow.Batch {
	t.Helper()
	sent := *b
	sent.FDs = nil
	for _, fd := range b.FDs {
		d, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		sent.FDs = append(sent.FDs, d)
	}
	return &sent
}

// handTo hands b, detached from another server, to next as an upgrade
// does: next adopts copies of its descriptors (it must refuse none), the
// old process's are closed, and the adopted connections run.
func handTo(t *testing.T, next *lb, b *flow.Batch) {
	t.Helper()
	run, refused := next.server.AdoptFlows(passed(t, b), false)
	if refused.Len() != 0 {
		t.Fatalf("refused %+v", refused)
	}
	for _, fd := range b.FDs {
		unix.Close(fd)
	}
	run()
}
