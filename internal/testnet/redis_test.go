package testnet

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRedisKillAndRestart(t *testing.T) {
	r := StartRedis(t)
	if want := "redis://" + r.Addr; r.URL() != want {
		t.Errorf("URL() = %q, want %q", r.URL(), want)
	}
	if got, err := r.Do("SET", "k", "v"); err != nil || got != "OK" {
		t.Fatalf("SET = %q, %v; want OK", got, err)
	}
	if got, err := r.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	for _, c := range [][2]string{{"save", "save\n"}, {"appendonly", "appendonly\nno"}} {
		if got, err := r.Do("CONFIG", "GET", c[0]); err != nil || got != c[1] {
			t.Errorf("CONFIG GET %s = %q, %v; want %q: no persistence", c[0], got, err, c[1])
		}
	}

	r.Kill()
	r.Kill() // a second kill does nothing
	if got, err := r.Do("GET", "k"); err == nil {
		t.Fatalf("GET after Kill = %q, want an error", got)
	}
	if c, err := net.Dial("tcp", r.Addr); err == nil {
		c.Close()
		t.Fatal("the port still accepts after Kill")
	}

	addr := r.Addr
	r.Restart()
	if r.Addr != addr {
		t.Errorf("Restart moved the server from %s to %s", addr, r.Addr)
	}
	if got, err := r.Do("GET", "k"); err != nil || got != "(nil)" {
		t.Fatalf("GET after Restart = %q, %v; want (nil): the data must be gone", got, err)
	}
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Restart = %q, %v; want PONG", got, err)
	}
}

// Restart waits for a port taken meanwhile to come free.
func TestRedisRestartRetriesABusyPort(t *testing.T) {
	r := StartRedis(t)
	r.Kill()
	ln, err := net.Listen("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	freed := make(chan struct{})
	go func() {
		defer close(freed)
		time.Sleep(500 * time.Millisecond)
		ln.Close()
	}()
	r.Restart()
	<-freed
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Restart = %q, %v; want PONG", got, err)
	}
	if !strings.Contains(r.Log(), "in use") {
		t.Errorf("the first start did not meet the busy port; log:\n%s", r.Log())
	}
}

// Restart on a running server is a crash and a start: the data is gone.
func TestRedisRestartWhileRunning(t *testing.T) {
	r := StartRedis(t)
	if _, err := r.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	// Even a snapshot on disk does not survive.
	if _, err := r.Do("SAVE"); err != nil {
		t.Fatal(err)
	}
	r.Restart()
	if got, err := r.Do("EXISTS", "k"); err != nil || got != "0" {
		t.Fatalf("EXISTS after Restart = %q, %v; want 0", got, err)
	}
}

func TestRedisDoRendersReplies(t *testing.T) {
	r := StartRedis(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},                   // simple string
		{[]string{"INCR", "n"}, "1"},                 // integer
		{[]string{"INCRBY", "n", "-5"}, "-4"},        // negative integer
		{[]string{"SET", "b", "a\r\nb c"}, "OK"},     // a value RESP must not split
		{[]string{"GET", "b"}, "a\r\nb c"},           // bulk string
		{[]string{"SET", "empty", ""}, "OK"},         //
		{[]string{"GET", "empty"}, ""},               // empty bulk string
		{[]string{"GET", "missing"}, "(nil)"},        // nil bulk string
		{[]string{"RPUSH", "l", "x", "y", "z"}, "3"}, //
		{[]string{"LRANGE", "l", "0", "-1"}, "x\ny\nz"},
		{[]string{"LRANGE", "missing", "0", "-1"}, ""}, // empty array
		{[]string{"MGET", "b", "missing"}, "a\r\nb c\n(nil)"},
		{[]string{"BLPOP", "missing", "0.01"}, "(nil)"}, // nil array
	}
	for _, tt := range tests {
		got, err := r.Do(tt.args...)
		if err != nil || got != tt.want {
			t.Errorf("Do(%q) = %q, %v; want %q", tt.args, got, err, tt.want)
		}
	}
	_, err := r.Do("NOSUCHCOMMAND")
	var re RedisError
	if !errors.As(err, &re) || !strings.HasPrefix(string(re), "ERR ") {
		t.Errorf("unknown command: error %v (%T), want a RedisError starting with ERR", err, err)
	}
}

// A server with a password: Do authenticates, and readiness does not need
// to.
func TestRedisRequirePass(t *testing.T) {
	r := StartRedis(t, "--requirepass", "s3cret")
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v; want PONG", got, err)
	}
	anon := &Redis{Addr: r.Addr}
	if _, err := anon.Do("PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without the password: %v, want NOAUTH", err)
	}
}

// A server that cannot start fails with its log.
func TestRedisStartFailureShowsLog(t *testing.T) {
	if redisServerPath() == "" {
		Missing(t, "redis-server not installed", "redis-server")
	}
	r := &Redis{t: t, dir: t.TempDir() + "/data", logPath: t.TempDir() + "/redis.log",
		args: []string{redisServerPath(), "--no-such-option", "1"}}
	r.port = FreePort(t)
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
	busy, err := r.start()
	if err == nil {
		r.Kill()
		t.Fatal("redis-server started with a bad option")
	}
	if busy || !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("busy %v, error %v: want not busy and the log naming the bad option", busy, err)
	}
}
