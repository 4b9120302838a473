package main

import (
	"errors"
	"testing"
)

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.1:65535", true},
		{"127.0.0.2:8080", false},
		{"0.0.0.0:8080", false},
		{"10.0.0.1:80", false},
		{"localhost:80", false},
		{"[::1]:80", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1:70000", false},
		{"127.0.0.1", false},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			err := checkLoopback(tc.addr)
			if (err == nil) != tc.ok {
				t.Fatalf("checkLoopback(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrNotLoopback) && tc.addr != "127.0.0.1" {
				t.Fatalf("error %v does not wrap ErrNotLoopback", err)
			}
		})
	}
	if _, err := dialLoopback("192.0.2.1:80"); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("dialLoopback to a foreign address: %v, want ErrNotLoopback", err)
	}
	if _, err := listenLoopback("0.0.0.0:0"); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("listenLoopback on all addresses: %v, want ErrNotLoopback", err)
	}
}
