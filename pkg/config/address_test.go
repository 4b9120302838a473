package config

import "testing"

// TestLooksLikeHostName separates names (which get the "l4lb does not
// resolve DNS" advice) from mistyped IP addresses (which are told they are
// not valid IPs).
func TestLooksLikeHostName(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"db.internal", true},
		{"db-1.example.com.", true},
		{"10.0.0.1a", true},
		{"300.1.2.3", false},
		{"10.0.1", false},
		{"1.2.3.4.5", false},
		{"example.123", false},
		{"a b", false},
		{"a..b", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := looksLikeHostName(tt.host); got != tt.want {
			t.Errorf("looksLikeHostName(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
