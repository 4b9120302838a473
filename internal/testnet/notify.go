package testnet

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FakeSystemd is a NOTIFY_SOCKET for tests: a unixgram socket that
// receives sd_notify datagrams, with the sender's credentials attached
// (SO_PASSCRED), and parses them. Like systemd it reads every datagram as
// it arrives, so a sender never finds the queue full.
type FakeSystemd struct {
	Path string
	conn *net.UnixConn
	done chan struct{}

	mu     sync.Mutex
	got    []Notification
	err    error // a malformed datagram, or the socket failing
	next   int   // the first datagram WaitFor and Pending have not returned
	marker int   // Pending's sync markers sent
}

// Notification is one sd_notify datagram: its VAR=VALUE lines, and the
// process that sent it.
type Notification struct {
	Fields map[string]string
	PID    int
	Raw    string
}

// Has reports whether the datagram set key to value.
func (n Notification) Has(key, value string) bool {
	v, ok := n.Fields[key]
	return ok && v == value
}

// syncKey marks the datagrams Pending sends itself.
const syncKey = "TESTNET_SYNC"

// StartFakeSystemd listens on a fresh socket until the test ends. It does
// not set NOTIFY_SOCKET: use Env for a child, or t.Setenv.
func StartFakeSystemd(t testing.TB) *FakeSystemd {
	t.Helper()
	// A short directory: a socket path has at most 107 bytes, and a test's
	// TempDir carries its name.
	dir, err := os.MkdirTemp("", "sdnotify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		conn.Close()
		t.Fatalf("SO_PASSCRED: %v %v", err, serr)
	}
	f := &FakeSystemd{Path: path, conn: conn, done: make(chan struct{})}
	go f.read()
	t.Cleanup(func() {
		conn.Close()
		<-f.done
	})
	return f
}

// Env is the NOTIFY_SOCKET assignment for a child's environment.
func (f *FakeSystemd) Env() string { return "NOTIFY_SOCKET=" + f.Path }

func (f *FakeSystemd) read() {
	defer close(f.done)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, _, _, err := f.conn.ReadMsgUnix(buf, oob)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		stop := err != nil
		var note Notification
		if err == nil {
			note, err = parseNotification(buf[:n], oob[:oobn])
		}
		f.mu.Lock()
		if err != nil {
			if f.err == nil {
				f.err = err
			}
		} else {
			f.got = append(f.got, note)
		}
		f.mu.Unlock()
		if stop {
			return
		}
	}
}

// WaitFor waits until a datagram not returned yet satisfies match and
// returns it with the ones received before it, failing the test after a
// generous deadline or on a malformed datagram.
func (f *FakeSystemd) WaitFor(t testing.TB, what string, match func(Notification) bool) (Notification, []Notification) {
	t.Helper()
	return f.scan(t, what, func(n Notification) bool {
		_, mark := n.Fields[syncKey]
		return !mark && match(n)
	})
}

// Pending returns every datagram sent before the call and not returned
// yet. A unixgram socket queues datagrams in order, whoever sends them:
// Pending sends a marker of its own and returns what was read before it.
func (f *FakeSystemd) Pending(t testing.TB) []Notification {
	t.Helper()
	f.mu.Lock()
	f.marker++
	mark := strconv.Itoa(f.marker)
	f.mu.Unlock()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: f.Path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Write([]byte(syncKey + "=" + mark))
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, before := f.scan(t, "the sync marker", func(n Notification) bool { return n.Has(syncKey, mark) })
	return before
}

// scan returns the first datagram not returned yet that satisfies stop,
// and those before it (markers left out), waiting for it.
func (f *FakeSystemd) scan(t testing.TB, what string, stop func(Notification) bool) (Notification, []Notification) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var before []Notification
	for {
		f.mu.Lock()
		err := f.err
		for err == nil && f.next < len(f.got) {
			n := f.got[f.next]
			f.next++
			if stop(n) {
				f.mu.Unlock()
				return n, before
			}
			if _, mark := n.Fields[syncKey]; !mark {
				before = append(before, n)
			}
		}
		f.mu.Unlock()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; received meanwhile: %v", what, raws(before))
		}
		time.Sleep(time.Millisecond)
	}
}

func parseNotification(b, oob []byte) (Notification, error) {
	out := Notification{Fields: map[string]string{}, Raw: string(b)}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return out, errors.New("malformed sd_notify datagram: " + strconv.Quote(string(b)))
		}
		out.Fields[k] = v
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return out, err
	}
	for _, m := range msgs {
		if cred, err := unix.ParseUnixCredentials(&m); err == nil {
			out.PID = int(cred.Pid)
		}
	}
	return out, nil
}

func raws(ns []Notification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Raw
	}
	return out
}
