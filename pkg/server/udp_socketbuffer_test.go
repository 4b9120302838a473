package server

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// portDrops is the kernel's drop count of each UDP socket bound to
// 127.0.0.1:port, by inode (/proc/net/udp's last column: the count
// SO_RXQ_OVFL reports).
func portDrops(t *testing.T, port int) map[string]int64 {
	t.Helper()
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 13 {
			continue
		}
		hexAddr, hexPort, _ := strings.Cut(fs[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); err != nil || int(p) != port || hexAddr != "0100007F" {
			continue
		}
		n, err := strconv.ParseInt(fs[12], 10, 64)
		if err != nil {
			t.Fatalf("/proc/net/udp: %q: %v", sc.Text(), err)
		}
		out[fs[9]] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sumDrops(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// probe sends p on c until its echo comes back (the burst's echoes may
// come first): once it has, the loop has read p, and counted whatever
// drops p's drop count revealed.
func probe(t *testing.T, c *net.UDPConn, p string) {
	t.Helper()
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, err := c.Read(buf)
			if err != nil {
				break // sent again: only a timeout ends the read
			}
			if string(buf[:n]) == p {
				return
			}
		}
	}
	t.Fatalf("%s: no echo of %q", c.LocalAddr(), p)
}

// Datagrams the kernel drops on a listener's full sockets are counted as
// socket_buffer drops, exactly as many as the kernel counts, on every
// socket of the listener (one per loop, each with its own count). The
// loops are held while clients send bursts far larger than the small
// receive_buffer, until both sockets have dropped; then each client's
// probe, read after the drops, carries its socket's count.
func TestUDPSocketBufferDropsAreCountedPerSocket(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{loops: 2, receiveBuffer: 4096})
	port := lb.server.udpFronts[0].addr.Port
	if before := portDrops(t, port); len(before) != 2 || sumDrops(before) != 0 {
		t.Fatalf("the listener's sockets before the bursts: %v, want 2 without drops", before)
	}
	var releases []func()
	for _, l := range lb.server.loops {
		releases = append(releases, stallLoop(t, l))
	}
	var clients []*net.UDPConn
	burst := make([]byte, 1000)
	allDropped := func(m map[string]int64) bool {
		for _, n := range m {
			if n == 0 {
				return false
			}
		}
		return true
	}
	// A client's source port picks its socket: new clients until each
	// socket has had one (one in 2^64 left none to one of them).
	for !allDropped(portDrops(t, port)) {
		if len(clients) == 64 {
			t.Fatalf("64 clients' bursts, drops by socket: %v", portDrops(t, port))
		}
		c := udpClient(t, lb.addr)
		clients = append(clients, c)
		for range 32 {
			if _, err := c.Write(burst); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, release := range releases {
		release()
	}
	// Two rounds of probes: the first reveals every drop, the second
	// shows none is counted twice.
	for round := range 2 {
		for i, c := range clients {
			probe(t, c, fmt.Sprintf("probe %d of round %d", i, round))
		}
		kernel := portDrops(t, port)
		got := lb.front.Drops[udpsession.DropSocketBuffer].Load()
		if got != sumDrops(kernel) || got == 0 {
			t.Fatalf("round %d: %d socket_buffer drops counted; the kernel dropped %v (%d), want the same, > 0",
				round, got, kernel, sumDrops(kernel))
		}
	}
}

// lockedBuf is a log destination the loops and the test share.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// listenerRcvbuf is SO_RCVBUF, as the kernel reports it (doubled), of
// each of lb's listener sockets.
func listenerRcvbuf(t *testing.T, lb *udpLB) []int {
	t.Helper()
	var sizes []int
	for _, l := range lb.server.loops {
		l.Do(func() {
			l.udp.EachSocket(lb.front, func(fd int) {
				n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
				if err != nil {
					t.Error(err)
				}
				sizes = append(sizes, n)
			})
		})
	}
	return sizes
}

func rmemMax(t *testing.T) int {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// receive_buffer is every socket's SO_RCVBUF from the bind on; a reload
// that changes it sets it on the kept sockets, and one that removes it
// leaves them as they are. A size above net.core.rmem_max is capped by
// the kernel, and the warning says so, naming the sysctl.
func TestUDPReceiveBufferAtBindAndReload(t *testing.T) {
	be := testnet.StartUDPBackend(t, "a", "")
	var logs lockedBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	lb := startUDPLB(t, []string{be.Addr}, udpOpts{loops: 2, receiveBuffer: 16384, log: log})
	want := func(stage string, size int) {
		t.Helper()
		got := listenerRcvbuf(t, lb)
		if len(got) != 2 || got[0] != 2*size || got[1] != 2*size {
			t.Errorf("%s: SO_RCVBUF %v, want 2 sockets at %d (the kernel doubles %d)", stage, got, 2*size, size)
		}
	}
	want("bound", 16384)
	fe := Frontend{Name: "u", Bind: "127.0.0.1:0", Protocol: "udp", Pool: lb.pool, SessionTimeout: time.Minute, MaxSessions: 1000}
	reload := func(size int) {
		t.Helper()
		fe.ReceiveBuffer = size
		st, err := lb.server.Reload([]Frontend{fe}, ConnCap{MaxConnections: 100})
		if err != nil || st.Kept != 1 {
			t.Fatalf("reload: %+v, %v", st, err)
		}
	}
	reload(65536)
	want("reloaded", 65536)
	reload(0)
	want("receive_buffer removed", 65536)
	if !strings.Contains(logs.String(), "receive_buffer removed") {
		t.Errorf("no word of the removed receive_buffer; log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "capped") {
		t.Errorf("a warning for sizes under net.core.rmem_max; log:\n%s", logs.String())
	}

	huge := rmemMax(t) + 4096
	reload(huge)
	want("capped", rmemMax(t))
	line := fmt.Sprintf("listener=u asked=%d effective=%d sysctl=net.core.rmem_max", huge, rmemMax(t))
	if !strings.Contains(logs.String(), line) {
		t.Errorf("no warning with %q; log:\n%s", line, logs.String())
	}
	mustEcho(t, udpClient(t, lb.addr), []byte("still serving"))
}

// A session's socket can overflow too, a backend sending faster than its
// loop reads: those replies are socket_buffer drops of the listener, as
// many as the kernel counts on the session's socket.
func TestUDPSessionSocketBufferDropsAreCounted(t *testing.T) {
	be, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	lb := startUDPLB(t, []string{be.LocalAddr().String()}, udpOpts{loops: 1})
	c := udpClient(t, lb.addr)
	if err := c.SetReadBuffer(1 << 20); err != nil { // the replies relayed while the test does not read
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	be.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, session, err := be.ReadFromUDP(buf) // the session's socket
	if err != nil {
		t.Fatal(err)
	}
	release := stallLoop(t, lb.server.loops[0])
	reply := make([]byte, 1000)
	for sent := 0; sumDrops(portDrops(t, session.Port)) == 0; sent++ {
		if sent == 10000 {
			t.Fatalf("10000 replies and the session's socket dropped none: %v", portDrops(t, session.Port))
		}
		if _, err := be.WriteToUDP(reply, session); err != nil {
			t.Fatal(err)
		}
	}
	release()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("the probe reply never reached the client")
		}
		if _, err := be.WriteToUDP([]byte("probe"), session); err != nil {
			t.Fatal(err)
		}
		if readUntil(c, "probe", time.Second) {
			break
		}
	}
	kernel := sumDrops(portDrops(t, session.Port))
	if got := lb.front.Drops[udpsession.DropSocketBuffer].Load(); got != kernel || got == 0 {
		t.Fatalf("%d socket_buffer drops counted; the session's socket dropped %d, want the same, > 0", got, kernel)
	}
}

// readUntil reads c until p arrives (true) or nothing has for wait.
func readUntil(c *net.UDPConn, p string, wait time.Duration) bool {
	buf := make([]byte, 2048)
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		if err != nil {
			return false
		}
		if string(buf[:n]) == p {
			return true
		}
	}
}
