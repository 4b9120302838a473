package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestNotifySendsStateToSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	for _, want := range []string{"READY=1", "STOPPING=1"} {
		send := Ready
		if want == "STOPPING=1" {
			send = Stopping
		}
		if err := send(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := ln.ReadFromUnix(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("socket got %q (%v), want %q", buf[:n], err, want)
		}
	}
}

func TestNotifyWithoutSystemdIsANoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Ready(); err != nil {
		t.Fatalf("Ready without NOTIFY_SOCKET: %v", err)
	}
}

func TestNotifyReportsAMissingSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent.sock"))
	if err := Ready(); err == nil {
		t.Fatal("no error for a NOTIFY_SOCKET nobody listens on")
	}
}
