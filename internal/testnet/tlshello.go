package testnet

import (
	"bytes"
	"crypto/tls"
	"net"
	"testing"
)

// GoClientHello returns the first bytes Go's crypto/tls client writes with
// cfg: its ClientHello record (with Go's default post-quantum key share,
// over 1,200 bytes), for a test that routes by it without a handshake.
func GoClientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	client, server := net.Pipe()
	server.Close()
	r := &recordingConn{Conn: client}
	defer r.Close()
	if err := tls.Client(r, cfg).Handshake(); err == nil {
		t.Fatal("a TLS handshake against EOF succeeded")
	}
	if r.written.Len() == 0 {
		t.Fatal("the TLS client wrote nothing")
	}
	return r.written.Bytes()
}

// recordingConn keeps what is written to it; reads see the closed pipe.
type recordingConn struct {
	net.Conn
	written bytes.Buffer
}

func (r *recordingConn) Write(b []byte) (int, error) { return r.written.Write(b) }
