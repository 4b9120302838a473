package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/loop"
	"github.com/l4lb/l4lb/pkg/pool"
)

// stallLoop holds l's goroutine in a task until release is called, so
// datagrams sent meanwhile wait in the kernel and reach the loop together:
// in one recvmmsg, and with their epoll events in the order they arrived.
func stallLoop(t *testing.T, l *loop.Loop) (release func()) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	l.Post(func() {
		close(entered)
		<-held
	})
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the loop never ran the stalling task")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return release
}

// recorder is a UDP backend that keeps every datagram it receives, in
// order, and echoes it.
type recorder struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  []string
	done chan struct{}
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{conn: c, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 1<<16)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got = append(r.got, string(buf[:n]))
			r.mu.Unlock()
			c.WriteToUDP(buf[:n], from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-r.done })
	return r
}

func (r *recorder) addr() string { return r.conn.LocalAddr().String() }

func (r *recorder) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *recorder) count(p string) int {
	n := 0
	for _, g := range r.received() {
		if g == p {
			n++
		}
	}
	return n
}

func (r *recorder) has(p string) bool { return r.count(p) > 0 }

// answerN is a backend that answers a datagram starting with digit N with
// N copies of it ("0..." is never answered).
func answerN(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if n == 0 || buf[0] < '0' || buf[0] > '9' {
				continue
			}
			for range buf[0] - '0' {
				c.WriteToUDP(buf[:n], from)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String()
}

func drops(f *loop.UDPFront) map[string]int64 {
	m := map[string]int64{}
	for r := range loop.NumDropReasons {
		if n := f.Drops[r].Load(); n != 0 {
			m[r.String()] = n
		}
	}
	return m
}

// taken counts the client datagrams the listener has dealt with: relayed
// or dropped.
func taken(f *loop.UDPFront) int64 {
	n := f.DatagramsToBackend.Load()
	for r := range loop.NumDropReasons {
		if !kernelDrop(r) { // never read: the listener did not deal with it
			n += f.Drops[r].Load()
		}
	}
	return n
}

// echoOnce sends p once and fails t unless the one reply is p.
func echoOnce(t *testing.T, c *net.UDPConn, p []byte) {
	t.Helper()
	got, err := askOnce(c, p, 20*time.Second)
	if err != nil || !bytes.Equal(got, p) {
		t.Fatalf("%d-byte datagram: reply of %d bytes, %v", len(p), len(got), err)
	}
}

func readOne(t *testing.T, c *net.UDPConn) string {
	t.Helper()
	buf := make([]byte, 1<<16)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("%s: %v", c.LocalAddr(), err)
	}
	return string(buf[:n])
}

// Several clients' datagrams interleaved in one batch: each client's runs
// go to its own session, in order, and the replies, batched together for
// the listener socket, each reach their own client.
func TestUDPInterleavedClientsInOneBatchKeepTheirOwnDatagrams(t *testing.T) {
	rec := startRecorder(t)
	lb := startUDPLB(t, []string{rec.addr()}, udpOpts{loops: 1})
	cs := make([]*net.UDPConn, 4)
	for i := range cs {
		cs[i] = udpClient(t, lb.addr)
	}
	// Runs of one client (some equal-sized, for one GSO send), single
	// datagrams, and a session's first datagram in the middle of a batch.
	seq := []int{0, 0, 0, 1, 0, 0, 2, 2, 2, 2, 1, 1, 3, 0, 3, 3}
	sent := make([][]string, len(cs))
	release := stallLoop(t, lb.server.loops[0])
	for k, c := range seq {
		size := 200
		if k%3 == 0 {
			size = 150 + k
		}
		p := fmt.Sprintf("c%d-%02d-", c, len(sent[c]))
		p += string(bytes.Repeat([]byte{'a' + byte(c)}, size-len(p)))
		if _, err := cs[c].Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
		sent[c] = append(sent[c], p)
	}
	release()
	for c, want := range sent {
		for i, w := range want {
			if got := readOne(t, cs[c]); got != w {
				t.Fatalf("client %d, reply %d: got %.8q..., want %.8q...", c, i, got, w)
			}
		}
	}
	if got := lb.front.Started.Load(); got != int64(len(cs)) {
		t.Errorf("%d sessions for %d clients", got, len(cs))
	}
	if d := drops(lb.front); len(d) != 0 {
		t.Errorf("drops %v", d)
	}
}

// A burst that reaches the loop in one batch goes to the backend as one
// GSO send (the kernel permitting), as the same datagrams in order.
func TestUDPBurstInOneBatchGoesAsOneGSOSend(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	gso := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, 500)
	unix.Close(fd)
	if gso != nil {
		t.Skipf("no UDP GSO here: %v", gso)
	}
	rec := startRecorder(t)
	lb := startUDPLB(t, []string{rec.addr()}, udpOpts{loops: 1})
	c := udpClient(t, lb.addr)
	echoOnce(t, c, []byte("open")) // the session exists: the whole burst is one run
	var sent []string
	release := stallLoop(t, lb.server.loops[0])
	for i := range 8 {
		n := 500
		if i == 7 {
			n = 123 // a shorter last one fits the burst
		}
		p := fmt.Sprintf("%d", i) + string(bytes.Repeat([]byte{'x'}, n-1))
		c.Write([]byte(p))
		sent = append(sent, p)
	}
	release()
	for i, w := range sent {
		if got := readOne(t, c); got != w {
			t.Fatalf("reply %d: %d bytes %.1q, want %d bytes %.1q", i, len(got), got, len(w), w)
		}
	}
	if got := rec.received()[1:]; len(got) != len(sent) {
		t.Fatalf("backend got %d datagrams of the burst, want %d", len(got), len(sent))
	}
	if b := lb.front.Bursts.Load(); b != 1 {
		t.Errorf("%d GSO sends for one burst in one batch, want 1", b)
	}
}

// At max_sessions, a parked socket is the first to go: a new client takes
// its place and no open session is evicted.
func TestUDPParkedSocketGoesBeforeAnOpenSessionAtMaxSessions(t *testing.T) {
	lb := startUDPLB(t, []string{answerN(t)}, udpOpts{responses: 2, maxSessions: 2, loops: 1, reuseSockets: true})
	f := lb.front
	a := udpClient(t, lb.addr)
	echoOnce(t, a, []byte("1a")) // one reply of two: a's session stays open
	b := udpClient(t, lb.addr)
	b.Write([]byte("2b")) // two replies: b's session ends clean and parks its socket
	readOne(t, b)
	readOne(t, b)
	testnet.Eventually(t, "b's socket parked", func() bool { return f.Parked.Load() == 1 && f.Sessions.Load() == 1 })
	c := udpClient(t, lb.addr)
	echoOnce(t, c, []byte("1c")) // at the cap: the parked socket makes room
	if ev, p, s := f.Ended[loop.EndEvicted].Load(), f.Parked.Load(), f.Sessions.Load(); ev != 0 || p != 0 || s != 2 {
		t.Fatalf("after a new client at the cap: %d evicted, %d parked, %d sessions; want 0, 0, 2", ev, p, s)
	}
	echoOnce(t, a, []byte("1a again"))
	if got := f.Started.Load(); got != 3 {
		t.Errorf("%d sessions started, want 3: a kept its session", got)
	}
}

// A refused first datagram larger than what a session keeps for a retry
// (2 KiB) is dropped and counted, not retried; the client's own retry is
// a new session on the next backend.
func TestUDPLargeRefusedFirstDatagramIsCountedNotRetried(t *testing.T) {
	dead := closedUDPPort(t)
	live := startRecorder(t)
	// Round robin: the first session to backend 0 (dead), the next to 1.
	lb := startUDPLB(t, []string{dead, live.addr()}, udpOpts{retries: 1, loops: 1})
	f := lb.front
	c := udpClient(t, lb.addr)
	p := bytes.Repeat([]byte{'L'}, 3000)
	c.Write(p)
	testnet.Eventually(t, "the session to end refused", func() bool { return f.Ended[loop.EndRefused].Load() == 1 })
	if d := f.Drops[loop.DropRefused].Load(); d != 1 {
		t.Errorf("%d datagrams dropped as refused, want 1", d)
	}
	if _, failed := lb.pool.Backends()[0].Dials(pool.DialClient); failed != 1 {
		t.Errorf("dead backend: %d failed dials, want 1", failed)
	}
	echoOnce(t, c, p)
	if n := len(live.received()); n != 1 {
		t.Errorf("live backend got %d datagrams, want the client's retry only", n)
	}
}

// Shutdown with sessions open (answered, and with their first datagram
// still unanswered) and sockets parked: every session ends as shutdown,
// every socket is closed, every backend's count is given back, and a
// dial still waiting for its reply is no evidence either way.
func TestUDPShutdownEndsEverySessionAndClosesEverySocket(t *testing.T) {
	addr := answerN(t)
	fds := countOpenFDs(t)
	lb := startUDPLB(t, []string{addr}, udpOpts{responses: 2, replyTimeout: time.Hour, loops: 1, reuseSockets: true})
	f := lb.front
	var cs []*net.UDPConn
	send := func(p string) *net.UDPConn {
		c := udpClient(t, lb.addr)
		cs = append(cs, c)
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Answered once of twice: open. Never answered: open, the dial pending.
	for i, p := range []string{"1 a", "1 b", "1 c", "0 d", "0 e"} {
		if p[0] == '1' {
			if got := readOne(t, send(p)); got != p {
				t.Fatalf("client %d got %q", i, got)
			}
			continue
		}
		send(p)
	}
	// Answered twice: parked. Both reach the loop at once, so neither can
	// reuse the other's socket.
	release := stallLoop(t, lb.server.loops[0])
	twice := []*net.UDPConn{send("2 f"), send("2 g")}
	release()
	for _, c := range twice {
		readOne(t, c)
		readOne(t, c)
	}
	testnet.Eventually(t, "5 sessions open and 2 sockets parked", func() bool {
		return f.Sessions.Load() == 5 && f.Parked.Load() == 2 && taken(f) == 7
	})
	for _, c := range cs {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := lb.server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if s, p, e := f.Sessions.Load(), f.Parked.Load(), f.Ended[loop.EndShutdown].Load(); s != 0 || p != 0 || e != 5 {
		t.Errorf("after shutdown: %d sessions, %d parked, %d ended as shutdown; want 0, 0, 5", s, p, e)
	}
	b := lb.pool.Backends()[0]
	if n := b.Active(); n != 0 {
		t.Errorf("backend still counts %d after shutdown", n)
	}
	if ok, failed := b.Dials(pool.DialClient); ok != 5 || failed != 0 {
		t.Errorf("dials %d ok, %d failed; want 5 answered, and the 2 unanswered ones no evidence", ok, failed)
	}
	if n := countOpenFDs(t); n != fds {
		t.Errorf("%d fds open after shutdown, %d before l4lb started", n, fds)
	}
}
