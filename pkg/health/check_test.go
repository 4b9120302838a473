package health

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestTCPCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	live := ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now: connection refused
	t.Cleanup(func() { ln.Close() })

	emfile := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.EMFILE}
	}
	isLocal := func(err error) bool { return errors.Is(err, syscall.EMFILE) }
	var dialed []string
	counting := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, network+" "+addr)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	tests := []struct {
		name  string
		check Check
		want  Result
	}{
		{"listening backend passes", TCPCheck(nil, live, isLocal), Pass},
		{"refused backend fails", TCPCheck(nil, deadAddr, isLocal), Fail},
		{"local trouble is inconclusive", TCPCheck(emfile, live, isLocal), Inconclusive},
		{"without isLocal local trouble fails", TCPCheck(emfile, live, nil), Fail},
		{"injected dialer is used", TCPCheck(counting, live, nil), Pass},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if got := tc.check(ctx); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if len(dialed) != 1 || dialed[0] != "tcp "+live {
		t.Fatalf("injected dialer calls = %v", dialed)
	}
}
