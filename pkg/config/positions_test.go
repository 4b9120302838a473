package config

import (
	"reflect"
	"testing"
)

func TestLocateRecordsKeyLines(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]int // a subset of what must be recorded
	}{
		{
			name: "tables and keys",
			src:  "a = 1\n[global]\n  accept_loops = 2 # c\n\n[log]\nlevel = \"x\"\n",
			want: map[string]int{"a": 1, "global": 2, "global.accept_loops": 3, "log": 5, "log.level": 6},
		},
		{
			name: "arrays of tables count per parent element",
			src:  "[[l]]\nx = 1\n[[l]]\nx = 2\n[[p.a.b]]\ny = 1\n[p.a]\n[[p.a.b]]\ny = 2\n",
			want: map[string]int{"l[0]": 1, "l[0].x": 2, "l[1]": 3, "l[1].x": 4, "p.a.b[0].y": 6, "p.a": 7, "p.a.b[1]": 8, "p.a.b[1].y": 9},
		},
		{
			name: "nested arrays of tables",
			src:  "[[a]]\n[[a.b]]\nk = 1\n[[a]]\n[[a.b]]\nk = 2\n[a.c]\nk = 3\n",
			want: map[string]int{"a[0].b[0].k": 3, "a[1].b[0].k": 6, "a[1].c.k": 8},
		},
		{
			name: "dotted and quoted keys",
			src:  "[pool.\"a.b\"]\nhealth.rise = 1\n'lit key' = 2\n\"esc\\u0041\" = 3\n[ pool . web ]\nx = 1\n",
			want: map[string]int{`pool."a.b"`: 1, `pool."a.b".health`: 2, `pool."a.b".health.rise`: 2, `pool."a.b"."lit key"`: 3, `pool."a.b".escA`: 4, "pool.web.x": 6},
		},
		{
			name: "multi-line strings hide headers and keys",
			src:  "a = \"\"\"\n[fake]\nb = 1\n\"\"\"\nc = '''\nd = 2\n'''''\ne = \"q\\\"[x]\"\nf = 1\n",
			want: map[string]int{"a": 1, "c": 5, "e": 8, "f": 9},
		},
		{
			name: "arrays and inline tables over lines",
			src:  "[p]\nb = [\n  { addr = \"x\", w = 1 }, # one\n  {\n    addr = \"y\"\n  },\n]\nafter = 1\n",
			want: map[string]int{"p.b": 2, "p.b[0]": 3, "p.b[0].addr": 3, "p.b[0].w": 3, "p.b[1]": 4, "p.b[1].addr": 5, "p.after": 8},
		},
		{
			name: "date-time with a space",
			src:  "t = 1979-05-27 07:32:00Z\nu = 2\n",
			want: map[string]int{"t": 1, "u": 2},
		},
		{
			name: "crlf",
			src:  "[g]\r\na = 1\r\nb = 2\r\n",
			want: map[string]int{"g": 1, "g.a": 2, "g.b": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pos := locate([]byte(tt.src))
			for key, want := range tt.want {
				if got, ok := pos.lines[key]; !ok || got != want {
					t.Errorf("%s: line %d (recorded %v), want %d; all: %v", key, got, ok, want, pos.lines)
				}
			}
		})
	}
}

func TestLocateRecordsNothingFromCommentsOrStrings(t *testing.T) {
	pos := locate([]byte("# [x]\n# y = 1\na = \"[z]\" # w = 2\n"))
	if want := map[string]int{"a": 3}; !reflect.DeepEqual(pos.lines, want) {
		t.Errorf("lines = %v, want %v", pos.lines, want)
	}
}

func TestPositionsLineFallsBackToEnclosingTable(t *testing.T) {
	pos := locate([]byte("[[listener]]\nbind = 1\n\n[pool.web.health]\nrise = 1\n[[pool.web.backend]]\nweight = 1\n"))
	tests := []struct {
		key  string
		want int
	}{
		{"listener[0].bind", 2},
		{"listener[0].name", 1},         // missing: its table's header
		{"pool.web", 4},                 // implicit table: first line inside
		{"pool.web.backend[0].addr", 6}, // missing in an array element
		{"pool.web.retries", 4},         // missing in an implicit table
		{"nothing.here", 0},
	}
	for _, tt := range tests {
		if got := pos.line(tt.key); got != tt.want {
			t.Errorf("line(%s) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestKeyAncestors(t *testing.T) {
	tests := []struct {
		key  string
		want []string
	}{
		{"pool.web.backend[1].weight", []string{"pool.web.backend[1]", "pool.web.backend", "pool.web", "pool"}},
		{`pool."a.b[0]".x`, []string{`pool."a.b[0]"`, "pool"}},
		{`pool."q\"."`, []string{"pool"}},
		{"global", []string{}},
	}
	for _, tt := range tests {
		if got := keyAncestors(tt.key); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("keyAncestors(%s) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestJoinKeyQuotesWhenNeeded(t *testing.T) {
	tests := []struct{ parent, name, want string }{
		{"", "pool", "pool"},
		{"pool", "web-1_a", "pool.web-1_a"},
		{"pool", "a.b", `pool."a.b"`},
		{"pool", "", `pool.""`},
		{"pool", "[0]", `pool."[0]"`},
	}
	for _, tt := range tests {
		if got := joinKey(tt.parent, tt.name); got != tt.want {
			t.Errorf("joinKey(%q, %q) = %s, want %s", tt.parent, tt.name, got, tt.want)
		}
	}
}
