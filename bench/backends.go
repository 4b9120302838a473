package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

// runBackendRole serves a sink and/or an echo listener until killed.
//
// Sink: counts bytes until the client half-closes, then answers with the
// count as 8 bytes big-endian, so the sender knows what arrived.
// Echo: writes back what it reads; with -tag, the first byte of every write
// is the tag, so the failover client can tell which backend answered.
// TLS echo (sni scenario): the same behind a TLS handshake, tagged per
// address (sni_backend.go).
// UDP echo and sink: see udp_backend.go; the sink's count goes to the
// -udp-count file the harness maps.
func runBackendRole(args []string) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	sink := fs.String("sink", "", "sink listen address")
	echo := fs.String("echo", "", "echo listen address")
	tag := fs.Int("tag", 0, "stamp this byte (1..255) on every echo write")
	udpEcho := fs.String("udp-echo", "", "UDP echo address")
	udpSink := fs.String("udp-sink", "", "UDP sink address (needs -udp-count)")
	udpCount := fs.String("udp-count", "", "file whose first 8 bytes count the UDP sink's datagrams")
	tlsEcho := fs.String("tls-echo", "", "comma list of TLS echo addresses (sni scenario), the k-th stamping tag k+1")
	tlsCert := fs.String("tls-cert", "", "TLS echo certificate (PEM)")
	tlsKey := fs.String("tls-key", "", "TLS echo key (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sink == "" && *echo == "" && *udpEcho == "" && *udpSink == "" && *tlsEcho == "" {
		return errors.New("backend: need -sink, -echo, -udp-echo, -udp-sink or -tls-echo")
	}
	if (*udpSink == "") != (*udpCount == "") {
		return errors.New("backend: -udp-sink and -udp-count go together")
	}
	if err := startUDPBackends(*udpEcho, *udpSink, *udpCount); err != nil {
		return err
	}
	if err := startTLSEchos(*tlsEcho, *tlsCert, *tlsKey); err != nil {
		return err
	}
	if *sink != "" {
		l, err := listenLoopback(*sink)
		if err != nil {
			return fmt.Errorf("sink: %w", err)
		}
		go serve(l, sinkConn)
	}
	if *echo != "" {
		l, err := listenLoopback(*echo)
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		t := byte(*tag)
		go serve(l, func(c *net.TCPConn) { echoConn(c, t) })
	}
	fmt.Fprintln(os.Stdout, readyLine)
	select {}
}

// startUDPBackends binds the UDP echo and sink (either may be "") and
// serves them until the process is killed; a server that fails ends the
// process, so the harness sees a dead backend rather than silent loss.
func startUDPBackends(echo, sink, countPath string) error {
	run := func(what string, f func() error) {
		go func() {
			if err := f(); err != nil {
				fmt.Fprintf(os.Stderr, "backend: %s: %v\n", what, err)
				os.Exit(1)
			}
		}()
	}
	if echo != "" {
		fd, err := udpListen(echo)
		if err != nil {
			return fmt.Errorf("udp echo: %w", err)
		}
		run("udp echo", func() error { return serveUDPEcho(fd, nil) })
	}
	if sink != "" {
		c, err := openUDPCounter(countPath)
		if err != nil {
			return fmt.Errorf("udp sink: %w", err)
		}
		fd, err := udpListen(sink)
		if err != nil {
			return fmt.Errorf("udp sink: %w", err)
		}
		run("udp sink", func() error { return serveUDPSink(fd, c.n, nil) })
	}
	return nil
}

func serve(l *net.TCPListener, handle func(*net.TCPConn)) {
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// EMFILE and friends: keep serving the connections we have.
			continue
		}
		go handle(c)
	}
}

func sinkConn(c *net.TCPConn) {
	defer c.Close()
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	_, _ = c.Write(b[:])
}

// echoConn echoes c (a TCP connection, or TLS over one) until it closes.
func echoConn(c net.Conn, tag byte) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if tag != 0 {
				buf[0] = tag
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
