package relay

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A backend that closes at once (its FIN) and so resets the bytes that
// reach it later: what a client sends after it saw the end, the loop
// writes to that backend, whose kernel answers with a reset, not an ACK.
//
// While the client's socket is still open (it sent no FIN), the reset is
// passed on: the client is reset, as it would be by the backend directly
// (its socket took our FIN, so its reads say EOF; SO_ERROR and its next
// write say EPIPE).
//
// When the client's FIN came with those bytes, its kernel had its FIN
// acknowledged by the loop's before the reset came back, and its socket
// is closed: no reset can reach it (nor could one from the backend
// directly reach a client whose FIN was acknowledged). The loop still
// learns of the reset by waiting a little on the backend's side after its
// last bytes, and logs and counts the connection as backend-reset, not
// completed.
func TestBackendLateResetOfBytesAfterItsFIN(t *testing.T) {
	for _, clientFIN := range []bool{false, true} {
		name := "client still open"
		if clientFIN {
			name = "client FIN with its bytes"
		}
		t.Run(name, func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			c := h.dial("p")
			defer c.Close()
			b := k.Next(t)
			b.Close() // at once: a FIN, nothing unread
			if n, err := readToEnd(c, 20*time.Second); n != 0 || err != io.EOF {
				t.Fatalf("client: %d bytes then %v, want the backend's end (EOF)", n, err)
			}
			if clientFIN {
				// Both in the loop's socket when it next looks: it writes
				// the bytes and ends the direction in the same turn.
				l := h.loops[0]
				clFD, _ := h.loopFDs(l)
				release := h.hold(l)
				if _, err := c.Write([]byte("late")); err != nil {
					t.Fatal(err)
				}
				c.CloseWrite()
				testnet.Eventually(t, "the bytes and the FIN to wait at the loop", func() bool {
					info, err := unix.GetsockoptTCPInfo(clFD, unix.IPPROTO_TCP, unix.TCP_INFO)
					// Its FIN taken after ours: TIME_WAIT, which leaves the socket closed.
					return inQueue(clFD) == 4 && err == nil && (info.State == unix.BPF_TCP_TIME_WAIT || info.State == unix.BPF_TCP_CLOSE)
				})
				release()
			} else {
				if _, err := c.Write([]byte("late")); err != nil {
					t.Fatal(err)
				}
				testnet.Eventually(t, "the reset to reach the client", func() bool {
					return errors.Is(sockError(t, c), unix.EPIPE)
				})
				if _, err := c.Write([]byte("x")); !errors.Is(err, unix.EPIPE) && !isReset(err) {
					t.Errorf("client's write after the reset: %v, want EPIPE", err)
				}
			}
			testnet.Eventually(t, "the connection to end", func() bool { return h.sh.Active.Load() == 0 })
			f := h.front("p")
			if r, done := f.Closed[CloseBackendReset].Load(), f.Closed[CloseCompleted].Load(); r != 1 || done != 0 {
				t.Fatalf("closed as backend-reset %d, completed %d; want the backend's reset counted", r, done)
			}
			if n := h.logs.count("relay reset", "outcome", "backend-reset"); n != 1 {
				t.Fatalf("%d relays logged as reset by the backend, want 1", n)
			}
		})
	}
}

// sockError is c's pending socket error (SO_ERROR), which it leaves
// pending.
func sockError(t *testing.T, c *net.TCPConn) error {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	// MSG_PEEK of nothing would consume nothing, but SO_ERROR clears what
	// it reads: read the socket's state instead, and the error only once
	// it is closed.
	rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		if info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); gerr != nil || info.State != 7 {
			return
		}
		v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if v != 0 {
		return unix.Errno(v)
	}
	return nil
}
