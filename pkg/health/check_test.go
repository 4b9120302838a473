package health

import (
	"context"
	"errors"
	"net"
	"strings"
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
		cause error // the errno the outcome's error must wrap; nil on Pass
	}{
		{"listening backend passes", TCPCheck(nil, live, isLocal), Pass, nil},
		{"refused backend fails", TCPCheck(nil, deadAddr, isLocal), Fail, syscall.ECONNREFUSED},
		{"local trouble is inconclusive", TCPCheck(emfile, live, isLocal), Inconclusive, syscall.EMFILE},
		{"without isLocal local trouble fails", TCPCheck(emfile, live, nil), Fail, syscall.EMFILE},
		{"injected dialer is used", TCPCheck(counting, live, nil), Pass, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			o := tc.check(ctx)
			if o.Result != tc.want {
				t.Fatalf("got %v (%v), want %v", o.Result, o.Err, tc.want)
			}
			if tc.cause == nil && o.Err != nil {
				t.Fatalf("a pass with an error: %v", o.Err)
			}
			if tc.cause != nil && !errors.Is(o.Err, tc.cause) {
				t.Fatalf("error %v, want one wrapping %v", o.Err, tc.cause)
			}
		})
	}
	if len(dialed) != 1 || dialed[0] != "tcp "+live {
		t.Fatalf("injected dialer calls = %v", dialed)
	}
}

// A refused connect says so, with the address it dialed: the operator
// reads the cause from Status.LastError and the logs.
func TestTCPCheckRefusedCause(t *testing.T) {
	addr := deadTCP(t)
	o, _ := run(TCPCheck(nil, addr, isLocal), generous)
	if o.Result != Fail || !errors.Is(o.Err, syscall.ECONNREFUSED) {
		t.Fatalf("refused connect: %v, %v; want fail with ECONNREFUSED", o.Result, o.Err)
	}
	if msg := o.Err.Error(); !strings.Contains(msg, addr) || !strings.Contains(msg, "connection refused") {
		t.Fatalf("refused connect's error %q does not name %s and the refusal", msg, addr)
	}
}

func TestShowBytes(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := []struct {
		name string
		b    []byte
		hex  bool
		want string
	}{
		{"text is quoted", []byte("HTTP/1.0 200"), false, `"HTTP/1.0 200"`},
		{"line ends are escaped", []byte("+OK\r\n"), false, `"+OK\r\n"`},
		{"empty", nil, false, `""`},
		{"binary is hex", []byte{0xca, 0xfe, 0x00}, false, "0xcafe00"},
		{"a control byte makes it hex", []byte("ok\x1b[2J"), false, "0x6f6b1b5b324a"},
		{"non-ASCII is hex", []byte("é"), false, "0xc3a9"},
		{"hex when asked", []byte("ok"), true, "0x6f6b"},
		{"long text is cut", []byte(long), false, `"` + long[:shownBytes] + `"... (100 bytes)`},
		{"long binary is cut", make([]byte, 100), false, "0x" + strings.Repeat("00", shownBytes) + "... (100 bytes)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := showBytes(tc.b, tc.hex); got != tc.want {
				t.Fatalf("showBytes(%q, %v) = %s, want %s", tc.b, tc.hex, got, tc.want)
			}
		})
	}
	// A pair is shown alike: both hex when either is binary.
	if got, want := showPair([]byte("ok"), []byte{0x00}); got != "0x6f6b" || want != "0x00" {
		t.Fatalf("showPair = %s, %s; want 0x6f6b, 0x00", got, want)
	}
}
