package sniroute

import (
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		want string // a part of the error; "" for none
	}{
		{"api.example.com", ""},
		{"API.Example.COM.", ""},
		{"*.example.com", ""},
		{"*.com", ""},
		{"localhost", ""},
		{"xn--bcher-kva.example", ""},
		{"_acme.internal", ""},
		{"a-b.example.com", ""},
		{long + "." + long + "." + long + "." + strings.Repeat("b", 61), ""}, // 253
		{long + "." + long + "." + long + "." + strings.Repeat("b", 62), "254 characters"},
		{"", "empty name"},
		{".", "empty name"},
		{"*", `"*" alone`},
		{"*.", `"*" alone`},
		{"a.*.example.com", "whole leftmost label"},
		{"a*.example.com", "whole leftmost label"},
		{"*a.example.com", "whole leftmost label"},
		{"*.*.example.com", "whole leftmost label"},
		{"192.0.2.1", "IP address"},
		{"::1", "IP address"},
		{"[::1]", "IP address"},
		{"*.10.0.0.1", "IP address"},
		{"10.0.0.300", "all-numeric"},
		{"a..example.com", "empty label"},
		{".example.com", "empty label"},
		{"a.example.com..", "empty label"},
		{strings.Repeat("a", 64) + ".com", "more than the 63"},
		{"-a.example.com", "'-'"},
		{"a-.example.com", "'-'"},
		{"a b.example.com", "byte ' '"},
		{"bücher.example", "xn--"},
		{"a:443", "byte ':'"},
	}
	for _, tt := range tests {
		err := CheckName(tt.name)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckName(%q) = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckName(%q) = %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckProtocol(t *testing.T) {
	for _, p := range []string{"h2", "http/1.1", "H2", strings.Repeat("x", 255)} {
		if err := CheckProtocol(p); err != nil {
			t.Errorf("CheckProtocol(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", strings.Repeat("x", 256)} {
		if err := CheckProtocol(p); err == nil {
			t.Errorf("CheckProtocol(%.10q...) = nil, want an error", p)
		}
	}
}
