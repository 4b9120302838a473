package config

import (
	"errors"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  Error
		want string
	}{
		{"all parts", Error{File: "l4lb.toml", Line: 7, Key: "pool.web.retries", Msg: "bad"}, "l4lb.toml:7: pool.web.retries: bad"},
		{"no line", Error{File: "l4lb.toml", Key: "listener", Msg: "none"}, "l4lb.toml: listener: none"},
		{"no key", Error{File: "l4lb.toml", Line: 3, Msg: "syntax"}, "l4lb.toml:3: syntax"},
		{"no file", Error{Line: 3, Key: "k", Msg: "m"}, "line 3: k: m"},
		{"message only", Error{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorsSortByLineWithUnknownLast(t *testing.T) {
	errs := Errors{
		{Line: 0, Msg: "a"}, {Line: 9, Msg: "b"}, {Line: 2, Msg: "c"}, {Line: 9, Msg: "d"}, {Line: 0, Msg: "e"},
	}
	errs.sort()
	if got, want := errs.Error(), "line 2: c\nline 9: b\nline 9: d\na\ne"; got != want {
		t.Errorf("sorted =\n%s\nwant\n%s", got, want)
	}
	if !errors.Is(errs, ErrInvalid) {
		t.Error("Errors is not ErrInvalid")
	}
	var first *Error
	if !errors.As(error(errs), &first) || first.Msg != "c" {
		t.Errorf("errors.As(*Error) = %v, want the first problem", first)
	}
}

func TestClosest(t *testing.T) {
	known := []string{"interval", "timeout", "rise", "fall", "enabled"}
	tests := []struct{ name, want string }{
		{"intervall", "interval"},
		{"timout", "timeout"},
		{"rize", "rise"},
		{"fal", "fall"},
		{"enable", "enabled"},
		{"port", ""},
		{"completely_different", ""},
	}
	for _, tt := range tests {
		if got := closest(tt.name, known); got != tt.want {
			t.Errorf("closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestIsPrime(t *testing.T) {
	primes := map[int]bool{2: true, 3: true, 5: true, 251: true, 65537: true, 10_000_019: true}
	for n := -1; n < 300; n++ {
		want := primes[n]
		if !want && n > 1 {
			want = true
			for d := 2; d < n; d++ {
				if n%d == 0 {
					want = false
				}
			}
		}
		if got := isPrime(n); got != want {
			t.Errorf("isPrime(%d) = %v, want %v", n, got, want)
		}
	}
	for n, want := range map[int]bool{65536: false, 65537: true, 10_000_019: true, 10_000_017: false, 3 * 3331 * 3331: false} {
		if got := isPrime(n); got != want {
			t.Errorf("isPrime(%d) = %v, want %v", n, got, want)
		}
	}
}
