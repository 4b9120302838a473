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
func runBackendRole(args []string) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	sink := fs.String("sink", "", "sink listen address")
	echo := fs.String("echo", "", "echo listen address")
	tag := fs.Int("tag", 0, "stamp this byte (1..255) on every echo write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sink == "" && *echo == "" {
		return errors.New("backend: need -sink or -echo")
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

func echoConn(c *net.TCPConn, tag byte) {
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
