package demo

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The echo backends say which backend answered: a TCP line comes back
// after "[backend ADDR] ", a UDP datagram comes back first, so a health
// check that expects what it sent passes, then " [backend ADDR]".
func TestEchoBackendsNameThemselves(t *testing.T) {
	testnet.CheckLeaks(t)
	tcpAddr, udpAddr := testnet.FreeAddr(t), testnet.FreeAddr(t)
	tb, err := StartTCP(tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ub, err := StartUDP(udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer ub.Close()

	c, err := net.Dial("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	for _, line := range []string{"one", "two"} {
		fmt.Fprintln(c, line)
		if got, err := r.ReadString('\n'); err != nil || got != "[backend "+tcpAddr+"] "+line+"\n" {
			t.Fatalf("TCP echo of %q: %q %v", line, got, err)
		}
	}
	if got, err := datagram(udpAddr, "ping"); err != nil || !strings.HasPrefix(got, "ping") || got != "ping [backend "+udpAddr+"]" {
		t.Fatalf("UDP echo: %q %v", got, err)
	}
}
