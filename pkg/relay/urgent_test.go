package relay

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// sendUrgent sends one byte as TCP urgent data (MSG_OOB).
func sendUrgent(t *testing.T, c *net.TCPConn, b byte) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), []byte{b}, unix.MSG_OOB, nil)
		return serr != unix.EAGAIN
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
}

// A TCP urgent byte in a stream must not cut it (splice(2) cannot read
// past the urgent mark) nor stall it (a read stops short before the mark):
// every byte, the urgent one in its place, reaches the other side, both
// when the direction splices (a stream) and when it copies (small writes
// held in the socket while the loop is busy), both ways.
func TestUrgentDataIsRelayedInline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before      int
		fromBackend bool
	}{
		{"client stream", 300 << 10, false},
		{"client small writes", 3, false},
		{"backend stream", 300 << 10, true},
		{"backend small writes", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
			p := h.open("p", k)
			defer p.close()
			from, to := p.client, p.backend
			if tc.fromBackend {
				from, to = to, from
			}
			before, after := randomBytes(t, tc.before), randomBytes(t, 1000)
			want := append(append(append([]byte{}, before...), 'U'), after...)
			got := make(chan []byte, 1)
			go func() {
				to.SetReadDeadline(time.Now().Add(20 * time.Second))
				b, _ := io.ReadAll(to)
				got <- b
			}()
			if tc.before < streamSize {
				// Small writes land together while the loop is held, so
				// its read meets the urgent mark.
				release := h.hold(h.loops[0])
				from.Write(before)
				sendUrgent(t, from, 'U')
				from.Write(after)
				release()
			} else {
				from.Write(before)
				sendUrgent(t, from, 'U')
				from.Write(after)
			}
			from.CloseWrite()
			b := <-got
			if !bytes.Equal(b, want) {
				t.Fatalf("got %d bytes, want %d (urgent byte inline at %d)", len(b), len(want), tc.before)
			}
		})
	}
}

const streamSize = 16 << 10
