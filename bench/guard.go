package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// ErrNotLoopback refuses any address other than 127.0.0.1: the harness
// generates load and must never point it at a real network.
var ErrNotLoopback = errors.New("address is not 127.0.0.1")

// checkLoopback accepts only "127.0.0.1:PORT" with a port in 1..65535.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if host != "127.0.0.1" {
		return fmt.Errorf("%q: %w", addr, ErrNotLoopback)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: bad port: %w", addr, ErrNotLoopback)
	}
	return nil
}

// loopAddr builds a checked loopback address for port.
func loopAddr(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// dialLoopback is the only way the harness dials: it refuses non-loopback.
func dialLoopback(addr string) (*net.TCPConn, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// listenLoopback is the only way the harness listens.
func listenLoopback(addr string) (*net.TCPListener, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, err
	}
	return l.(*net.TCPListener), nil
}
