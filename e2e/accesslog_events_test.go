package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// events counts lines by their event.
func events(lines []map[string]any) (n map[string]int) {
	n = map[string]int{}
	for _, m := range lines {
		n[m["event"].(string)]++
	}
	return n
}

// The real binary with access_interval = "1s" and access_on_connect: a
// long TCP connection writes its connect line, interim lines with the
// bytes so far, then its close line; a UDP session writes interim lines
// while open and a close line with its datagrams and bytes when it times
// out; every line says its event and proto.
func TestAccessLogIntervalAndUDP(t *testing.T) {
	testnet.CheckLeaks(t)
	b := testnet.StartBackend(t, "b", "")
	ub := testnet.StartUDPBackend(t, "u", "")
	file := filepath.Join(t.TempDir(), "access.log")
	ulisten := testnet.FreeAddr(t)
	path, listen, _ := accessConfigWith(t, b.Addr, file, "access_interval = \"1s\"\naccess_on_connect = true\n", fmt.Sprintf(`[[listener]]
name = "dgram"
bind = %q
protocol = "udp"
pool = "u"
session_timeout = "3s"
[pool.u]
[[pool.u.backend]]
addr = %q
[pool.u.health]
enabled = false
`, ulisten, ub.Addr))
	p := startL4LB(t, "", nil, "-config", path)
	waitServing(t, p, listen)

	c, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if tag, _ := r.ReadString('\n'); tag != "b\n" {
		t.Fatalf("tag %q", tag)
	}
	client := c.LocalAddr().String()
	u := udpClient(t, ulisten)
	if _, err := u.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	u.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("udp reply %q, %v", buf[:n], err)
	}
	uclient := u.LocalAddr().String()

	testnet.Eventually(t, "two interim lines of the TCP connection and one of the UDP session", func() bool {
		return events(accessLines(t, file, client))["interim"] >= 2 && events(accessLines(t, file, uclient))["interim"] >= 1
	})
	c.(*net.TCPConn).CloseWrite()
	io.ReadAll(r)
	c.Close()
	testnet.Eventually(t, "the close lines of both", func() bool {
		return events(accessLines(t, file, client))["close"] == 1 && events(accessLines(t, file, uclient))["close"] == 1
	})

	tcp := accessLines(t, file, client)
	if n := events(tcp); n["connect"] != 1 || tcp[0]["event"] != "connect" || tcp[len(tcp)-1]["event"] != "close" {
		t.Fatalf("TCP lines %v: want connect, interim ones, close", tcp)
	}
	for _, m := range tcp {
		if m["proto"] != "tcp" || m["backend"] != b.Addr || m["listener"] != "front" {
			t.Errorf("TCP line %v", m)
		}
		if ev := m["event"]; ev != "close" && (m["reason"] != "" || m["result"] != "") {
			t.Errorf("%s line with a reason or result: %v", ev, m)
		}
	}
	if end := tcp[len(tcp)-1]; end["reason"] != "completed" || end["result"] != "ok" || end["to_client"] != 2.0 || end["duration"].(float64) < 2 {
		t.Errorf("TCP close line %v: want completed, ok, the 2 bytes of the tag, 2s or more", end)
	}
	for _, m := range tcp[1 : len(tcp)-1] {
		if m["event"] != "interim" || m["to_client"] != 2.0 {
			t.Errorf("TCP interim line %v: want the 2 bytes so far", m)
		}
	}

	udp := accessLines(t, file, uclient)
	end := udp[len(udp)-1]
	for k, v := range map[string]any{"event": "close", "proto": "udp", "listener": "dgram", "pool": "u", "backend": ub.Addr,
		"reason": "timeout", "result": "ok", "to_backend": 5.0, "to_client": 5.0, "datagrams_to_backend": 1.0, "datagrams_to_client": 1.0} {
		if end[k] != v {
			t.Errorf("UDP close line %s = %v, want %v (%v)", k, end[k], v, end)
		}
	}
	if d := end["duration"].(float64); d < 3 {
		t.Errorf("UDP session lasted %vs, less than its session_timeout", d)
	}
	for _, m := range udp[:len(udp)-1] {
		if m["event"] != "interim" || m["proto"] != "udp" || m["datagrams_to_client"] != 1.0 {
			t.Errorf("UDP line before the close %v: want an interim line with the datagrams so far", m)
		}
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}
