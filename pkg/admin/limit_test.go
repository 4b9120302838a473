package admin

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
)

// dialIdle opens a connection that sends nothing.
func dialIdle(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer waits (generously) for the server to close c.
func closedByServer(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return nil
}

// get makes one request on a connection of its own.
func get(addr, path string) (int, string, error) {
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Past max_connections idle connections are closed at once and counted;
// an API call gets through as soon as one of those holding a slot leaves.
func TestConnectionCap(t *testing.T) {
	const limit, extra = 4, 3
	s, _, _ := startAdmin(t, config.Admin{Listen: "127.0.0.1:0", MaxConnections: limit}, testTimeouts)
	addr := s.Addr().String()

	var held []net.Conn
	for range limit {
		held = append(held, dialIdle(t, addr))
	}
	testnet.Eventually(t, "the server to accept the connections up to the cap", func() bool {
		return s.ln.open.Load() == limit
	})
	for i := range extra {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err == nil {
			err = closedByServer(c)
			c.Close()
		} else if errors.Is(err, syscall.ECONNRESET) {
			err = nil // refused so fast that the reset beat connect's return
		}
		if err != nil {
			t.Fatalf("connection %d past the cap: %v, want it closed at once", i+1, err)
		}
	}
	if got := s.ln.rejected.Load(); got != extra {
		t.Fatalf("%d rejected, want %d", got, extra)
	}
	if _, _, err := get(addr, "/api/v1/pools"); err == nil {
		t.Fatal("an API call got through with every slot held")
	}

	held[0].Close()
	failed := int64(0)
	testnet.Eventually(t, "an API call once a slot is free", func() bool {
		code, _, err := get(addr, "/api/v1/pools")
		if err != nil {
			failed++ // refused: the server has not yet seen the close
			return false
		}
		return code == 200
	})
	// Connection: close; the server closes its side just after replying.
	testnet.Eventually(t, "the API call's slot given back", func() bool { return s.ln.open.Load() == limit-1 })
	_, body, err := get(addr, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	want := extra + 1 + failed // the extras, the call with every slot held, the early retries
	for series, v := range map[string]int64{
		"l4lb_admin_connections_rejected_total": want,
		"l4lb_admin_connections_max":            limit,
		"l4lb_admin_connections_open":           limit, // limit-1 held, and this scrape
	} {
		m := regexp.MustCompile(`(?m)^` + series + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics", series)
		}
		if got, _ := strconv.ParseFloat(m[1], 64); int64(got) != v {
			t.Errorf("%s %v, want %d", series, m[1], v)
		}
	}
}

// Connections that idle give their slot back: one that never sends a
// request after the header timeout, a keep-alive one after the idle
// timeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	if defaultTimeouts.readHeader <= 0 || defaultTimeouts.idle <= 0 || defaultTimeouts.idle > time.Minute {
		t.Fatalf("default timeouts %+v: idle connections would hold admin slots too long", defaultTimeouts)
	}
	short := timeouts{readHeader: 200 * time.Millisecond, read: time.Minute, write: time.Minute, idle: 200 * time.Millisecond}
	s, _, _ := startAdmin(t, config.Admin{Listen: "127.0.0.1:0", MaxConnections: 4}, short)
	addr := s.Addr().String()

	silent := dialIdle(t, addr)
	if err := closedByServer(silent); err != nil {
		t.Fatalf("a connection that never sent a request: %v, want it closed", err)
	}

	kept := dialIdle(t, addr)
	io.WriteString(kept, "GET /api/v1/pools HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	kept.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(kept), nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if err := closedByServer(kept); err != nil {
		t.Fatalf("an idle keep-alive connection: %v, want it closed", err)
	}
	testnet.Eventually(t, "every slot given back", func() bool { return s.ln.open.Load() == 0 })
}
