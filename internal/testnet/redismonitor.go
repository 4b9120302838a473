package testnet

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// RedisMonitor records every command a Redis server executes, in the
// order it executed them (MONITOR), for tests that check what a client
// sent and in which order.
type RedisMonitor struct {
	mu    sync.Mutex
	lines []string
}

// Monitor starts recording r's commands; the recording ends with the
// test. It returns once the server has confirmed MONITOR, so every
// command executed after the call is recorded.
func (r *Redis) Monitor(t testing.TB) *RedisMonitor {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.Addr, 2*time.Second)
	if err != nil {
		t.Fatalf("redis monitor: %v", err)
	}
	br := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if r.password != "" {
		c.Write(respCommand([]string{"AUTH", r.password}))
		if _, err := readRESP(br); err != nil {
			c.Close()
			t.Fatalf("redis monitor: AUTH: %v", err)
		}
	}
	c.Write(respCommand([]string{"MONITOR"}))
	if ok, err := readRESP(br); err != nil || ok != "OK" {
		c.Close()
		t.Fatalf("redis monitor: MONITOR answered %q, %v", ok, err)
	}
	c.SetDeadline(time.Time{})
	m := &RedisMonitor{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, strings.TrimRight(strings.TrimPrefix(line, "+"), "\r\n"))
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return m
}

// Lines are the commands recorded so far, one per line as MONITOR prints
// them: a timestamp, the client, then each argument quoted.
func (m *RedisMonitor) Lines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}
