package sniroute

import (
	"strings"
	"testing"
)

// TestProblemMessageNamesTheOther checks the caller's naming reaches the
// message, as config's key-and-line names do.
func TestProblemMessageNamesTheOther(t *testing.T) {
	p := Check([]Route{{SNI: []string{"a.example.com"}}, {SNI: []string{"a.example.com"}}})
	if len(p) != 1 {
		t.Fatalf("Check = %v, want one problem", p)
	}
	got := p[0].Message(func(route int, field string, index int) string {
		return "R" + string(rune('0'+route)) + field + string(rune('0'+index))
	})
	if !strings.Contains(got, "is also R0sni0,") {
		t.Errorf("Message = %q, want the caller's name of route 0's sni[0]", got)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		routes []Route
		want   []string // each problem's Error(), in part; nil: none
	}{
		{"distinct names", []Route{{SNI: []string{"a.example.com"}}, {SNI: []string{"b.example.com", "*.example.com"}}}, nil},
		{"exact and wildcard of it", []Route{{SNI: []string{"a.example.com"}}, {SNI: []string{"*.example.com"}}}, nil},
		{"with and without alpn", []Route{{SNI: []string{"a.example.com"}}, {SNI: []string{"a.example.com"}, ALPN: []string{"h2"}}}, nil},
		{"disjoint alpn", []Route{{SNI: []string{"a.example.com"}, ALPN: []string{"h2"}}, {SNI: []string{"A.example.com."}, ALPN: []string{"http/1.1"}}}, nil},
		{"alpn is case-sensitive", []Route{{SNI: []string{"a.example.com"}, ALPN: []string{"h2"}}, {SNI: []string{"a.example.com"}, ALPN: []string{"H2"}}}, nil},
		{"empty sni", []Route{{}}, []string{"route[0].sni: must not be empty"}},
		{"bad name", []Route{{SNI: []string{"ok.example.com", "a.*.example.com"}}}, []string{`route[0].sni[1]: "a.*.example.com": "*" may only`}},
		{"bad protocol", []Route{{SNI: []string{"a.example.com"}, ALPN: []string{"h2", ""}}}, []string{`route[0].alpn[1]: "": an empty protocol`}},
		{"protocol twice", []Route{{SNI: []string{"a.example.com"}, ALPN: []string{"h2", "h2"}}}, []string{`route[0].alpn[1]: "h2" is already listed as route[0].alpn[0]`}},
		{"a protocol with a percent sign", []Route{{SNI: []string{"a.example.com"}, ALPN: []string{"h%s2"}}, {SNI: []string{"a.example.com"}, ALPN: []string{"h%s2"}}},
			[]string{`route[1].sni[0]: "a.example.com" is also route[0].sni[0], and both routes list protocol "h%s2" in alpn`}},
		{"name twice in a route", []Route{{SNI: []string{"a.example.com", "A.EXAMPLE.COM."}}}, []string{`route[0].sni[1]: "A.EXAMPLE.COM." is already listed as route[0].sni[0]`}},
		{"same name no alpn", []Route{{SNI: []string{"x.example.com", "a.example.com"}}, {SNI: []string{"a.example.com."}}},
			[]string{`route[1].sni[0]: "a.example.com." is also route[0].sni[1], and neither route has alpn`}},
		{"same wildcard no alpn", []Route{{SNI: []string{"*.example.com"}}, {SNI: []string{"*.Example.com"}}},
			[]string{`route[1].sni[0]: "*.Example.com" is also route[0].sni[0], and neither`}},
		{"shared protocol", []Route{{SNI: []string{"a.example.com"}, ALPN: []string{"h2", "http/1.1"}}, {SNI: []string{"a.example.com"}, ALPN: []string{"http/1.1"}}},
			[]string{`route[1].sni[0]: "a.example.com" is also route[0].sni[0], and both routes list protocol "http/1.1"`}},
		{"third route against the first", []Route{{SNI: []string{"a.example.com"}}, {SNI: []string{"a.example.com"}, ALPN: []string{"h2"}}, {SNI: []string{"a.example.com"}}},
			[]string{`route[2].sni[0]: "a.example.com" is also route[0].sni[0], and neither`}},
		{"every problem at once", []Route{{}, {SNI: []string{"*"}}, {SNI: []string{"1.2.3.4"}}},
			[]string{"route[0].sni: must", `route[1].sni[0]: "*": "*" alone`, `route[2].sni[0]: "1.2.3.4": an IP address`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.routes)
			if len(got) != len(tt.want) {
				t.Fatalf("Check = %v, want %d problems: %q", got, len(tt.want), tt.want)
			}
			for i, p := range got {
				if !strings.Contains(p.Error(), tt.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p.Error(), tt.want[i])
				}
			}
			_, err := New(tt.routes)
			if (err != nil) != (len(tt.want) > 0) {
				t.Errorf("New: %v, want an error exactly when Check finds a problem", err)
			}
		})
	}
}
