package relay

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/pool"
)

// The idle/read race, deterministically: an idle timeout must never end a
// stream with a clean FIN while bytes it read are undelivered. The backend
// never reads; the client sends more than the socket buffers hold, so the
// loop holds bytes it read (checked on the loop itself) when the idle
// timeout fires. Both sides must see a reset, never EOF: the client on its
// blocked write, the backend after the bytes that did reach it.
func TestIdleTimeoutWithUndeliveredBytesResetsBothSides(t *testing.T) {
	const idle = time.Second
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr},
		keys: fmt.Sprintf("idle_timeout = %q", idle)}}})
	p := h.open("p", k)
	defer p.close()

	writeErr := make(chan error, 1)
	go func() {
		chunk := make([]byte, 1<<20)
		p.client.SetWriteDeadline(time.Now().Add(60 * time.Second))
		for {
			if _, err := p.client.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	// The loop has read bytes it cannot deliver: the client-to-backend
	// stream holds them. From here nothing moves until the timeout.
	held := false
	testnet.Eventually(t, "the loop to hold undelivered bytes", func() bool {
		cs := h.conns()
		if len(cs) == 0 {
			return true // cut already: the check below fails
		}
		held = cs[0].pending[0]
		return held
	})
	if !held {
		t.Fatal("the connection was cut before the loop was seen holding bytes")
	}
	select {
	case err := <-writeErr:
		if !isReset(err) {
			t.Fatalf("client's write ended with %v, want a reset (ECONNRESET)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the idle timeout never cut the connection")
	}
	n, err := readToEnd(p.backend, 20*time.Second)
	if !isReset(err) {
		t.Fatalf("backend: %d bytes then %v, want a reset (ECONNRESET) after them, never EOF", n, err)
	}
	if n == 0 {
		t.Fatal("backend got no bytes: the test did not fill its socket")
	}
}

// Every cut ends with a reset on both sides: an idle timeout of a silent
// connection, and a shutdown's CutAll of connections in every state
// (quiet, holding undelivered bytes, half-closed, still dialing).
func TestEveryCutResetsBothSides(t *testing.T) {
	t.Run("idle timeout of a silent connection", func(t *testing.T) {
		const idle = 300 * time.Millisecond
		k := testnet.StartTaker(t)
		h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr},
			keys: fmt.Sprintf("idle_timeout = %q", idle)}}})
		start := time.Now()
		p := h.open("p", k)
		defer p.close()
		mustReset(t, "client", p.client)
		if el := time.Since(start); el < idle {
			t.Fatalf("cut after %v, before the %v idle timeout", el, idle)
		}
		mustReset(t, "backend", p.backend)
	})

	t.Run("shutdown cuts every connection", func(t *testing.T) {
		k := testnet.StartTaker(t)
		frozen := testnet.FrozenBackend(t)
		h := newHarness(t, harnessOpts{loops: 2, fronts: []frontSpec{
			{name: "p", backends: []string{k.Addr}},
			{name: "frozen", backends: []string{frozen}, keys: `connect_timeout = "60s"`},
		}})
		// Quiet, after a message each way.
		quiet := h.open("p", k)
		defer quiet.close()
		quiet.ping(t)
		// Holding bytes its backend will not take.
		stuck := h.open("p", k)
		defer stuck.close()
		stuckErr := make(chan error, 1)
		go func() {
			chunk := make([]byte, 1<<20)
			for {
				if _, err := stuck.client.Write(chunk); err != nil {
					stuckErr <- err
					return
				}
			}
		}()
		testnet.Eventually(t, "a connection to hold undelivered bytes", func() bool {
			for _, c := range h.conns() {
				if c.pending[0] {
					return true
				}
			}
			return false
		})
		// Half-closed by the client.
		half := h.open("p", k)
		defer half.close()
		half.client.CloseWrite()
		half.backend.SetReadDeadline(time.Now().Add(20 * time.Second))
		if n, err := half.backend.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("half-closed: backend read %d, %v; want EOF", n, err)
		}
		// Still dialing a backend that drops SYNs.
		dialing := h.dial("frozen")
		defer dialing.Close()
		testnet.Eventually(t, "the frozen dial to start", func() bool {
			for _, c := range h.conns() {
				if c.phase == phaseDialing {
					return true
				}
			}
			return false
		})

		for _, l := range h.loops {
			l.CutAll()
		}
		for _, c := range []struct {
			who string
			c   *net.TCPConn
		}{
			{"quiet client", quiet.client}, {"quiet backend", quiet.backend},
			{"stuck backend", stuck.backend},
			{"half-closed client", half.client},
			{"dialing client", dialing},
		} {
			mustReset(t, c.who, c.c)
		}
		// The stuck client was blocked writing: its write fails.
		select {
		case err := <-stuckErr:
			if !isReset(err) {
				t.Errorf("stuck client: write ended with %v, want a reset (ECONNRESET)", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("stuck client: write still blocked after the cut")
		}
		// The half-closed backend
		// already read its EOF (the client's own FIN): a write shows
		// the reset (the kernel reports a reset in CLOSE_WAIT as EPIPE).
		if _, err := half.backend.Write([]byte("late")); err == nil {
			t.Error("half-closed backend: write after the cut succeeded")
		}
		testnet.Eventually(t, "every connection to end", func() bool { return h.sh.Active.Load() == 0 })
		// The dial called off is no evidence against its backend.
		if ok, fail := h.front("frozen").Pool().At(0).Dials(pool.DialClient); ok != 0 || fail != 0 {
			t.Fatalf("frozen backend: %d dials succeeded, %d failed; want the cut one counted as neither", ok, fail)
		}
		if r := h.front("frozen").Rejected.Load(); r != 1 {
			t.Fatalf("frozen front: %d clients rejected, want the one cut mid-dial", r)
		}
	})
}
