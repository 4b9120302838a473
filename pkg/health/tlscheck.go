package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
)

// TLSOptions are what a TLS check asks of the backend.
type TLSOptions struct {
	// ServerName is sent in the ClientHello (SNI; none when it is an IP
	// literal, which SNI cannot carry) and, with Roots, is the name the
	// backend's certificate must be valid for. Required.
	ServerName string
	// Roots, when set, are the CAs the backend's certificate must chain
	// to (with its name, dates and key usage checked as any TLS client
	// does); nil: the certificate is not verified at all.
	Roots *CAFile
}

// TLSCheck returns a Check that TCP-connects to addr with dial and makes a
// TLS handshake (Go's client defaults: TLS 1.2 or 1.3, their usual cipher
// suites and key shares) with opts.ServerName. It passes once the
// handshake completes, and then closes the connection cleanly: a
// close_notify alert, a FIN, and a read of whatever the backend still
// sends (TLS 1.3 session tickets) until it closes too or ctx ends, so the
// close is neither a reset nor, to the backend, a TLS error.
//
// Without opts.Roots the check proves that the backend serves TLS for the
// name, not who it is: any certificate passes, expired and self-signed
// ones too. With Roots a certificate that does not verify fails the check,
// the x509 error as its cause.
//
// It fails when the connect fails, when the backend resets or closes the
// connection before the handshake completes, when it answers with
// something other than TLS or with a TLS alert (its cause names it: "tls:
// first record does not look like a TLS handshake", "remote error: tls:
// unrecognized name"), and when ctx's deadline passes first. A Roots that
// cannot be read is Inconclusive (local trouble, the backend not asked);
// isLocal classifies the dial's and the socket's errors as for TCPCheck,
// and a ctx canceled by the caller is Inconclusive. dial nil uses a plain
// net.Dialer.
func TLSCheck(dial DialFunc, addr string, opts TLSOptions, isLocal func(error) bool) Check {
	dial = orPlainDial(dial)
	return func(ctx context.Context) Outcome {
		cfg := &tls.Config{ServerName: opts.ServerName, InsecureSkipVerify: opts.Roots == nil}
		if opts.Roots != nil {
			roots, err := opts.Roots.Pool()
			if err != nil {
				return Outcome{Result: Inconclusive, Err: err}
			}
			cfg.RootCAs = roots
		}
		raw, err := dial(ctx, "tcp", addr)
		if err != nil {
			return dialOutcome(err, isLocal)
		}
		defer raw.Close()
		stop := bindContext(ctx, raw)
		defer stop()
		conn := tls.Client(raw, cfg)
		if err := conn.Handshake(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("closed by the backend before the handshake completed: %w", err)
			}
			return ioOutcome(ctx, "tls handshake", err, isLocal)
		}
		closeTLS(conn, raw)
		return Outcome{Result: Pass}
	}
}

// closeTLS ends a check's TLS connection as a well-behaved client does:
// close_notify, then a FIN, then it reads (and drops) what the backend
// still sends until its own FIN, so that closing raw does not turn unread
// bytes into a reset. raw's deadline (the check's) bounds the wait; the
// close is best effort, the handshake has already passed the check.
func closeTLS(conn *tls.Conn, raw net.Conn) {
	_ = conn.CloseWrite() // the close_notify alert; raw stays open
	if tcp, ok := raw.(interface{ CloseWrite() error }); ok {
		_ = tcp.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, raw)
}
