package clienthello

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"

	"github.com/l4lb/l4lb/internal/testnet"
)

// goHello returns the first bytes Go's crypto/tls client writes with cfg.
func goHello(t testing.TB, cfg *tls.Config) []byte { return testnet.GoClientHello(t, cfg) }

// openSSLHello runs openssl s_client with args against a listener of its
// own and returns the first bytes it sends: its records until a whole
// handshake message is in them, read by record headers alone.
func openSSLHello(t *testing.T, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("no openssl:", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(path, append([]string{"s_client", "-connect", ln.Addr().String()}, args...)...)
	cmd.Stdin = bytes.NewReader(nil)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var wire, msg []byte
	for len(msg) < 4 || len(msg) < 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
		hdr := make([]byte, recordHeaderLen)
		if _, err := io.ReadFull(c, hdr); err != nil {
			t.Fatalf("after %d bytes: %v", len(wire), err)
		}
		payload := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(c, payload); err != nil {
			t.Fatalf("after %d bytes: %v", len(wire), err)
		}
		wire = append(append(wire, hdr...), payload...)
		msg = append(msg, payload...)
	}
	return wire
}

// message puts back together the handshake message in wire's records.
func message(t testing.TB, wire []byte) []byte {
	t.Helper()
	var msg []byte
	s := cryptobyte.String(wire)
	for !s.Empty() {
		var payload cryptobyte.String
		if !s.Skip(3) || !s.ReadUint16LengthPrefixed(&payload) {
			t.Fatalf("not records: % x", wire)
		}
		msg = append(msg, payload...)
	}
	return msg
}

// records cuts msg into handshake records of size bytes (the last may be
// shorter).
func records(msg []byte, size int) []byte {
	var wire []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		wire = append(wire, contentTypeHandshake, 3, 1, byte(n>>8), byte(n))
		wire = append(wire, msg[:n]...)
		msg = msg[n:]
	}
	return wire
}

// padded returns the hello message msg with a padding extension (RFC
// 7685) that makes it total bytes long, handshake header included.
func padded(t testing.TB, msg []byte, total int) []byte {
	t.Helper()
	body := cryptobyte.String(msg[handshakeHeaderLen:])
	var fixed, exts cryptobyte.String
	start := len(body)
	var sid, suites, comp cryptobyte.String
	if !body.Skip(2+32) || !body.ReadUint8LengthPrefixed(&sid) || !body.ReadUint16LengthPrefixed(&suites) || !body.ReadUint8LengthPrefixed(&comp) {
		t.Fatal("not a hello")
	}
	fixed = cryptobyte.String(msg[handshakeHeaderLen : handshakeHeaderLen+start-len(body)])
	if !body.ReadUint16LengthPrefixed(&exts) {
		t.Fatal("no extensions")
	}
	pad := total - len(msg) - 4
	if pad < 0 {
		t.Fatalf("hello of %d bytes already", len(msg))
	}
	var b cryptobyte.Builder
	b.AddUint8(handshakeTypeClientHello)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddBytes(fixed)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddBytes(exts)
			b.AddUint16(21)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, pad)) })
		})
	})
	out := b.BytesOrPanic()
	if len(out) != total {
		t.Fatalf("padded to %d bytes, want %d", len(out), total)
	}
	return out
}

// echConfigList is an ECHConfigList (draft-ietf-tls-esni section 4) of one
// config for publicName with a fresh X25519 key, HKDF-SHA256 and
// AES-128-GCM: enough for Go's client to send a real ECH hello.
func echConfigList(t testing.TB, publicName string) []byte {
	t.Helper()
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(extECH) // version
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint8(7)     // config_id
			b.AddUint16(0x20) // DHKEM(X25519, HKDF-SHA256)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(key.PublicKey().Bytes()) })
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint16(1) // HKDF-SHA256
				b.AddUint16(1) // AES-128-GCM
			})
			b.AddUint8(64) // maximum_name_length
			b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(publicName)) })
			b.AddUint16(0) // no extensions
		})
	})
	return b.BytesOrPanic()
}
