package main

import (
	"net"
	"os"
	"testing"
	"time"
)

func TestDialsStop(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	end := t0.Add(3 * time.Second)
	tests := []struct {
		name string
		syns []time.Time
		want time.Duration
	}{
		{"no dial after the kill", nil, 0},
		{"three dials then quiet (a breaker)", at(1, 2, 3), 3 * time.Millisecond},
		{"dials then periodic checks", at(5, 10, 40, 1040, 2040), 40 * time.Millisecond},
		{"never stops (no detection)", at(0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, 1400, 1500, 1600, 1700, 1800, 1900, 2000, 2100, 2200, 2300, 2400, 2500, 2600, 2700, 2800, 2900), 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := dialsStop(tc.syns, t0, end, 300*time.Millisecond); got != tc.want {
				t.Fatalf("dialsStop = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsSYNTo(t *testing.T) {
	pkt := func(port uint16, flags byte) []byte {
		p := make([]byte, 40)
		p[0] = 0x45 // IPv4, 20-byte header
		p[9] = 6    // TCP
		p[22], p[23] = byte(port>>8), byte(port)
		p[33] = flags
		return p
	}
	if !isSYNTo(pkt(9001, 0x02), 9001) {
		t.Fatal("a SYN to the port was not recognised")
	}
	if isSYNTo(pkt(9001, 0x12), 9001) || isSYNTo(pkt(9002, 0x02), 9001) || isSYNTo(pkt(9001, 0x10), 9001) {
		t.Fatal("SYN-ACK, other port or plain ACK counted as a dial")
	}
}

func TestSYNWatchCountsDialsToOnePort(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a packet socket needs CAP_NET_RAW")
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	port := closed.Addr().(*net.TCPAddr).Port
	closed.Close() // dials to it are refused
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	w, err := newSYNWatch(port)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 5; i++ {
		net.Dial("tcp", closed.Addr().String()) // refused
		if c, err := net.Dial("tcp", open.Addr().String()); err == nil {
			c.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(w.between(start, time.Now().Add(time.Second))) < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	w.close()
	if n := len(w.between(start, time.Now())); n != 5 {
		t.Fatalf("counted %d SYNs to the closed port, want the 5 dials (and none to the open one)", n)
	}
}
