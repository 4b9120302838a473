package sdnotify

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// fake starts a NOTIFY_SOCKET for the test.
func fake(t *testing.T) *testnet.FakeSystemd {
	t.Helper()
	f := testnet.StartFakeSystemd(t)
	t.Setenv("NOTIFY_SOCKET", f.Path)
	return f
}

func next(t *testing.T, f *testnet.FakeSystemd) testnet.Notification {
	t.Helper()
	n, _ := f.WaitFor(t, "a datagram", func(testnet.Notification) bool { return true })
	return n
}

func TestEachNotificationIsOneDatagramOfAssignments(t *testing.T) {
	f := fake(t)
	for _, tc := range []struct {
		name string
		send func() error
		want map[string]string
	}{
		{"ready", Ready, map[string]string{"READY": "1"}},
		{"stopping", Stopping, map[string]string{"STOPPING": "1"}},
		{"watchdog", Watchdog, map[string]string{"WATCHDOG": "1"}},
		{"status", func() error { return Status("412 connections; pools: web 3/3") },
			map[string]string{"STATUS": "412 connections; pools: web 3/3"}},
		{"status with a newline", func() error { return Status("one\ntwo") },
			map[string]string{"STATUS": "one two"}},
		{"main pid", func() error { return MainPID(4321) }, map[string]string{"MAINPID": "4321"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.send(); err != nil {
				t.Fatal(err)
			}
			n := next(t, f)
			if len(n.Fields) != len(tc.want) {
				t.Fatalf("got %q, want exactly %v", n.Raw, tc.want)
			}
			for k, v := range tc.want {
				if !n.Has(k, v) {
					t.Fatalf("got %q, want %s=%s", n.Raw, k, v)
				}
			}
			if n.PID != os.Getpid() {
				t.Fatalf("sender pid %d, want this process (%d)", n.PID, os.Getpid())
			}
		})
	}
}

// RELOADING=1 carries the moment on CLOCK_MONOTONIC, in µs: it lies
// between two readings of that clock taken around the call.
func TestReloadingCarriesTheMonotonicClock(t *testing.T) {
	f := fake(t)
	before, err := monotonicUsec()
	if err != nil {
		t.Fatal(err)
	}
	if err := Reloading(); err != nil {
		t.Fatal(err)
	}
	after, _ := monotonicUsec()
	n := next(t, f)
	if len(n.Fields) != 2 || !n.Has("RELOADING", "1") {
		t.Fatalf("got %q, want RELOADING=1 and MONOTONIC_USEC", n.Raw)
	}
	usec, err := strconv.ParseInt(n.Fields["MONOTONIC_USEC"], 10, 64)
	if err != nil || usec < before || usec > after {
		t.Fatalf("MONOTONIC_USEC=%q, want a value in [%d, %d]", n.Fields["MONOTONIC_USEC"], before, after)
	}
}

func TestAbstractSocket(t *testing.T) {
	// Go's net package, like systemd, spells the abstract name "\0name"
	// as "@name".
	name := "@l4lb-sdnotify-test-" + strconv.Itoa(os.Getpid())
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", name)
	if err := Status("abstract"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	ln.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := ln.Read(buf)
	if err != nil || string(buf[:n]) != "STATUS=abstract" {
		t.Fatalf("abstract socket got %q (%v)", buf[:n], err)
	}
}

func TestNotifyWithoutSystemdIsANoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	for _, send := range []func() error{Ready, Stopping, Reloading, Watchdog, func() error { return Status("x") }} {
		if err := send(); err != nil {
			t.Fatalf("without NOTIFY_SOCKET: %v", err)
		}
	}
}

func TestNotifyReportsAMissingSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent.sock"))
	if err := Ready(); err == nil {
		t.Fatal("no error for a NOTIFY_SOCKET nobody listens on")
	}
}

// A manager that stops reading (its queue full) makes a notification fail
// after a while, never block its caller for good.
func TestNotifyDoesNotBlockOnAFullQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stalled.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	failed := make(chan error, 1)
	go func() {
		for range 100_000 {
			if err := Watchdog(); err != nil {
				failed <- err
				return
			}
		}
		failed <- nil
	}()
	select {
	case err := <-failed:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("notifications to a socket nobody reads: %v, want a send timeout", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a notification blocked on a full queue")
	}
}
