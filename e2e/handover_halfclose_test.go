package e2e

import (
	"io"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Half-closed connections survive an upgrade, each direction: one whose
// client has sent its request and shut its write side (the backend
// answers only after the upgrade), one whose backend has sent its
// greeting and shut its write side (the client sends only after the
// upgrade). Once the old process is gone the new one carries both: the
// open direction relays every byte, then EOF, and the closed one stays
// closed; an l4lb that drains instead resets both 2 s after the upgrade.
func TestHandoverKeepsHalfClosedConnections(t *testing.T) {
	testnet.CheckLeaks(t)
	b := startRawBackend(t)
	path, listen, _ := handoverConfig(t, backendTOML(b.Addr))
	chain := startChain(t, l4lbBin, path)

	// The client's half-close reaches the backend as EOF.
	clientClosed := dialTCP(t, listen)
	if _, err := io.WriteString(clientClosed, "request"); err != nil {
		t.Fatal(err)
	}
	if err := clientClosed.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	toClientClosed := b.next(t)
	if got, err := io.ReadAll(toClientClosed); err != nil || string(got) != "request" {
		t.Fatalf("the backend read %q, %v; want the request, then EOF", got, err)
	}
	// The backend's half-close reaches the client as EOF.
	backendClosed := dialTCP(t, listen)
	toBackendClosed := b.next(t)
	if _, err := io.WriteString(toBackendClosed, "greeting"); err != nil {
		t.Fatal(err)
	}
	if err := toBackendClosed.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(backendClosed); err != nil || string(got) != "greeting" {
		t.Fatalf("the client read %q, %v; want the greeting, then EOF", got, err)
	}

	old, served := chain.upgrade(t)
	waitOldGone(t, old, served)

	payload := patterned(1 << 20)
	// The backend answers the half-closed client through the new process.
	sendAndClose(t, "the backend's answer to the half-closed client", toClientClosed, clientClosed, payload)
	// The client sends to the half-closed backend through the new process.
	sendAndClose(t, "the client's bytes to the half-closed backend", backendClosed, toBackendClosed, payload)
	checkHandedOver(t, chain.logText(), 1, 2, 0)
}

// sendAndClose writes payload on from and half-closes it; to must read it
// all, byte for byte, then EOF.
func sendAndClose(t *testing.T, what string, from interface {
	io.Writer
	CloseWrite() error
}, to io.Reader, payload []byte) {
	t.Helper()
	werr := make(chan error, 1)
	go func() {
		_, err := from.Write(payload)
		if err == nil {
			err = from.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(to)
	if werr := <-werr; werr != nil {
		t.Fatalf("%s: sending: %v (reset: %v)", what, werr, isReset(werr))
	}
	if err != nil {
		t.Fatalf("%s: %d of %d bytes, then %v (reset: %v)", what, len(got), len(payload), err, isReset(err))
	}
	if at := firstDiff(got, payload); at >= 0 {
		t.Fatalf("%s: %d bytes, first differing at %d of %d", what, len(got), at, len(payload))
	}
}
