package relay

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// queuedClients holds l inside one turn while n clients connect to front
// (their handshakes complete in the kernel: they wait in the accept
// queue, unaccepted), runs whileHeld in that turn, and returns the clients.
func queuedClients(t *testing.T, h *harness, l *Loop, front string, n int, whileHeld func()) []*net.TCPConn {
	t.Helper()
	queued, done := make(chan struct{}), make(chan struct{})
	l.r.Post(func() {
		<-queued
		whileHeld()
		close(done)
	})
	clients := make([]*net.TCPConn, n)
	for i := range clients {
		clients[i] = h.dial(front)
	}
	close(queued)
	<-done
	return clients
}

// A reload that removes a listener closes its sockets, and closing a
// listening socket resets every connection still in its accept queue:
// clients whose connect had succeeded. The loop takes them first, past
// its per-turn batch, and relays them like any other.
func TestDetachedListenerServesItsQueuedClients(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{be.Addr}}}})
	l, f := h.loops[0], h.front("p")
	const n = 3*acceptBatch + 5
	clients := queuedClients(t, h, l, "p", n, func() { l.DetachListener(f.Front) })
	if c, err := net.DialTimeout("tcp", f.addr, 5*time.Second); err == nil {
		c.Close()
		t.Fatal("the detached listener still accepts")
	}
	for i, c := range clients {
		c.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		tag, err := r.ReadString('\n')
		if err != nil || tag != "b\n" {
			t.Fatalf("client %d of %d queued when its listener was detached: %q, %v (want the backend's tag)", i, n, tag, err)
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if _, err := io.ReadFull(r, make([]byte, 4)); err != nil {
			t.Fatalf("client %d: echo: %v", i, err)
		}
		c.Close()
	}
}

// After an upgrade's hand-over the new process holds the same listening
// sockets: the queue is its to serve, and the old loop, closing only its
// own descriptor, must leave it alone.
func TestUnwatchedListenerLeavesItsQueue(t *testing.T) {
	be := testnet.StartBackend(t, "b", "")
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{be.Addr}}}})
	l, f := h.loops[0], h.front("p")
	// The other process's descriptor of the socket.
	var other int
	h.on(l, func() {
		var err error
		if other, err = unix.Dup(l.lsocks[0].fd); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	defer unix.Close(other)
	l.UnwatchListeners()
	const n = 5
	clients := queuedClients(t, h, l, "p", n, func() { l.DetachListener(f.Front) })
	for i := range n {
		fd, _, err := unix.Accept4(other, unix.SOCK_CLOEXEC)
		if err != nil {
			t.Fatalf("accept %d of %d queued clients on the other descriptor: %v: the closing loop took them", i+1, n, err)
		}
		unix.Close(fd)
	}
	for _, c := range clients {
		c.Close()
	}
}
