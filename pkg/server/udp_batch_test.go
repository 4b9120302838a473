package server

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

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
