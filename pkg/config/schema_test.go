package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReferenceIsGenerated fails when docs/configuration.md is not what
// the schema generates, naming the first line that differs.
func TestReferenceIsGenerated(t *testing.T) {
	committed, err := os.ReadFile("../../" + ReferencePath)
	if err != nil {
		t.Fatalf("%v: generate it with: go generate ./pkg/config", err)
	}
	if line, got, want, same := firstDiff(committed, Reference()); !same {
		t.Fatalf("%s:%d differs from what the schema generates:\n file:      %q\n generated: %q\nregenerate it with: go generate ./pkg/config", ReferencePath, line, got, want)
	}
}

// firstDiff returns the first line (1-based) where a and b differ, and
// that line of each ("" past the end of one).
func firstDiff(a, b []byte) (line int, lineA, lineB string, same bool) {
	if bytes.Equal(a, b) {
		return 0, "", "", true
	}
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || i >= len(la) || i >= len(lb) {
			return i + 1, x, y, false
		}
	}
}

func TestFirstDiff(t *testing.T) {
	tests := []struct {
		a, b  string
		line  int
		x, y  string
		equal bool
	}{
		{"a\nb\n", "a\nb\n", 0, "", "", true},
		{"a\nb\n", "a\nc\n", 2, "b", "c", false},
		{"a\n", "a\nb\n", 2, "", "b", false},
		{"a\nb", "a\nb\n", 3, "", "", false},
	}
	for _, tt := range tests {
		line, x, y, same := firstDiff([]byte(tt.a), []byte(tt.b))
		if line != tt.line || x != tt.x || y != tt.y || same != tt.equal {
			t.Errorf("firstDiff(%q, %q) = %d %q %q %v, want %d %q %q %v", tt.a, tt.b, line, x, y, same, tt.line, tt.x, tt.y, tt.equal)
		}
	}
}

// goType is the Go type of a default or bound of each kind.
var goType = map[Kind]reflect.Type{
	KindString:      reflect.TypeFor[string](),
	KindStrings:     reflect.TypeFor[[]string](),
	KindInteger:     reflect.TypeFor[int](),
	KindFloat:       reflect.TypeFor[float64](),
	KindBool:        reflect.TypeFor[bool](),
	KindDuration:    reflect.TypeFor[time.Duration](),
	KindDurationOff: reflect.TypeFor[time.Duration](),
}

// TestSchemaIsWellFormed checks every key of the schema: a meaning, a
// default and bounds of its kind's Go type, a default inside its bounds
// (or 0 where Zero says what 0 means) and among its values, and no key
// twice in a table.
func TestSchemaIsWellFormed(t *testing.T) {
	for _, sec := range Schema() {
		if sec.Meaning == "" {
			t.Errorf("%s has no meaning", sec.Header())
		}
		seen := map[string]bool{}
		for _, k := range sec.Keys {
			name := sec.Path + "." + k.Name
			if seen[k.Name] {
				t.Errorf("%s twice", name)
			}
			seen[k.Name] = true
			typ, ok := goType[k.Kind]
			if !ok {
				t.Errorf("%s: unknown kind %q", name, k.Kind)
				continue
			}
			if k.Meaning == "" || strings.Contains(k.Meaning, "\n") {
				t.Errorf("%s: meaning %q, want one line", name, k.Meaning)
			}
			for what, v := range map[string]any{"default": k.Default, "min": k.Min, "max": k.Max} {
				if v != nil && reflect.TypeOf(v) != typ {
					t.Errorf("%s: %s is %T, want %v for a %s", name, what, v, typ, k.Kind)
				}
			}
			if k.Default != nil && k.Values != nil && !slices.Contains(k.Values, k.Default.(string)) {
				t.Errorf("%s: default %q is not one of %v", name, k.Default, k.Values)
			}
			if k.Only != "" && !slices.Contains(Protocols(), k.Only) {
				t.Errorf("%s: only %q, want a protocol", name, k.Only)
			}
			if k.Default == nil {
				continue
			}
			switch k.Kind {
			case KindInteger:
				lo, hi := k.intRange()
				if d := k.Default.(int); d < lo || d > hi {
					t.Errorf("%s: default %d outside %d..%d", name, d, lo, hi)
				}
			case KindDuration, KindDurationOff:
				lo, hi := k.durationRange()
				d := k.Default.(time.Duration)
				zeroOK := d == 0 && (k.Zero != "" || k.Kind == KindDurationOff)
				if !zeroOK && (d < lo || d > hi) {
					t.Errorf("%s: default %v outside %v..%v", name, d, lo, hi)
				}
			}
		}
	}
}

// schemaTestFile is a valid file with a TCP listener and pool (web), the
// listener with a route, and a UDP listener and pool (dns), every table
// present; lines[table] are
// written into table, whose header is written as the key is named in
// errors.
func schemaTestFile(lines map[string]string) string {
	tables := []struct{ header, body string }{
		{"[global]", ""},
		{"[admin]", ""},
		{"[log]", ""},
		{"[cluster]", ""},
		{"[[listener]]", "name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\n"},
		{"[[listener.route]]", "sni = [\"api.example.com\"]\npool = \"web\"\n"},
		{"[[listener]]", "name = \"dns\"\nbind = \"127.0.0.1:8081\"\nprotocol = \"udp\"\npool = \"dns\"\n"},
		{"[pool.web]", ""},
		{"[[pool.web.backend]]", "addr = \"127.0.0.1:9001\"\n"},
		{"[pool.web.health]", ""},
		{"[pool.web.breaker]", ""},
		{"[pool.web.discovery]", "dns = \"web.example.test:9001\"\n"},
		{"[pool.dns]", ""},
		{"[[pool.dns.backend]]", "addr = \"127.0.0.1:9053\"\n"},
		{"[pool.dns.health]", ""},
		{"[pool.dns.breaker]", ""},
	}
	names := []string{"global", "admin", "log", "cluster", "listener[0]", "listener[0].route[0]", "listener[1]", "pool.web", "pool.web.backend[0]", "pool.web.health", "pool.web.breaker", "pool.web.discovery", "pool.dns", "pool.dns.backend[0]", "pool.dns.health", "pool.dns.breaker"}
	var b strings.Builder
	for i, tb := range tables {
		b.WriteString(tb.header + "\n" + tb.body + lines[names[i]])
	}
	return b.String()
}

// tableOf is the table of schemaTestFile a key of sec goes in: the TCP
// listener or pool unless the key is for UDP ones only.
func tableOf(sec Section, k Key) string {
	udp := k.Only == ProtocolUDP
	pool := "pool.web"
	if udp {
		pool = "pool.dns"
	}
	switch sec.Path {
	case "listener":
		if udp {
			return "listener[1]"
		}
		return "listener[0]"
	case routePath:
		return "listener[0].route[0]"
	case poolPath:
		return pool
	case backendPath:
		return pool + ".backend[0]"
	case healthPath:
		return pool + ".health"
	case breakerPath:
		return pool + ".breaker"
	case discoveryPath:
		return "pool.web.discovery"
	}
	return sec.Path
}

// needs are the keys a key means nothing without, written beside it in
// its table (a redis-only key of [cluster] takes the redis store).
var needs = map[string]string{
	"listener.proxy_timeout":         "accept_proxy = true\ntrusted_proxies = [\"10.0.0.0/8\"]\n",
	"listener.burst_per_source":      "rate_per_source = 1.0\n",
	"listener.source_ipv4_prefix":    "max_connections_per_source = 1\n",
	"listener.source_ipv6_prefix":    "max_connections_per_source = 1\n",
	"listener.keepalive_interval":    "keepalive = \"60s\"\n",
	"listener.keepalive_count":       "keepalive = \"60s\"\n",
	poolPath + ".keepalive_interval": "keepalive = \"60s\"\n",
	poolPath + ".keepalive_count":    "keepalive = \"60s\"\n",
	healthPath + ".send":             "type = \"send-expect\"\n",
	healthPath + ".send_hex":         "type = \"send-expect\"\n",
	healthPath + ".expect":           "type = \"send-expect\"\n",
	healthPath + ".expect_hex":       "type = \"send-expect\"\n",
	healthPath + ".ca_file":          "type = \"tls\"\nserver_name = \"backend.test\"\n",
}

func needsOf(sec Section, k Key) string {
	if strings.Contains(k.Rule, `store = "redis" only`) {
		return "store = \"redis\"\nredis_url = \"redis://127.0.0.1:6379\"\n"
	}
	return needs[sec.Path+"."+k.Name]
}

// TestSchemaDefaultsAreParsed writes every key that has a default at its
// default, and checks the file decodes exactly as when the key is left
// out: the schema's default is the one Parse applies.
func TestSchemaDefaultsAreParsed(t *testing.T) {
	parse := func(t *testing.T, src string) *Config {
		t.Helper()
		cfg := mustParse(t, src)
		cfg.pos = nil
		if len(cfg.Cluster.SentinelAddrs) == 0 {
			cfg.Cluster.SentinelAddrs = nil // [] written, or left out
		}
		if len(cfg.Cluster.RedisAddrs) == 0 {
			cfg.Cluster.RedisAddrs = nil
		}
		return cfg
	}
	for _, sec := range Schema() {
		for _, k := range sec.Keys {
			if k.Default == nil {
				continue
			}
			t.Run(sec.Path+"."+k.Name, func(t *testing.T) {
				table := tableOf(sec, k)
				// The key's line is a comment when it is left out, so
				// every line number stays the same.
				set := needsOf(sec, k) + k.Name + " = " + tomlValue(k.Kind, k.Default) + "\n"
				unset := needsOf(sec, k) + "# " + k.Name + "\n"
				got := parse(t, schemaTestFile(map[string]string{table: set}))
				want := parse(t, schemaTestFile(map[string]string{table: unset}))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %s in %s decodes differently from leaving it out:\n set: %+v\nleft out: %+v", k.Name, tomlValue(k.Kind, k.Default), table, got, want)
				}
			})
		}
	}
}

// TestSchemaIsWhatParseReads checks that every table's keys in the schema
// are exactly the keys Parse accepts there: an unknown key's message
// lists the keys the table read.
func TestSchemaIsWhatParseReads(t *testing.T) {
	var top []string
	children := map[string][]string{} // schema path -> its sub-tables' names
	for _, sec := range Schema() {
		parent, name, nested := cutLast(sec.Path)
		if !nested {
			top = append(top, sec.Path)
		} else if parent != "pool" {
			children[parent] = append(children[parent], name)
		}
	}
	for _, sec := range append([]Section{{Path: ""}}, Schema()...) {
		if sec.Path == "pool" {
			continue // every key of [pool] is a pool's name
		}
		want := top
		if sec.Path != "" {
			want = slices.Concat(children[sec.Path], keyNames(sec.Keys))
		}
		t.Run("["+sec.Path+"]", func(t *testing.T) {
			k := Key{}
			table := tableOf(sec, k)
			if sec.Path == "" {
				table = "global"
			}
			lines := map[string]string{table: "zzzzzzzz = 1\n"}
			src := schemaTestFile(lines)
			if sec.Path == "" {
				src = "zzzzzzzz = 1\n" + schemaTestFile(nil)
			}
			_, err := Parse("test.toml", []byte(src))
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("want one error for the unknown key, got %v", err)
			}
			_, list, ok := strings.Cut(errs[0].Msg, ": ")
			if !ok || !strings.HasPrefix(errs[0].Msg, "unknown key; allowed") {
				t.Fatalf("message %q does not list the allowed keys", errs[0].Msg)
			}
			got := strings.Split(list, ", ")
			slices.Sort(got)
			want := slices.Sorted(slices.Values(want))
			if !slices.Equal(got, want) {
				t.Errorf("Parse reads %v,\nthe schema has %v", got, want)
			}
		})
	}
}

func keyNames(keys []Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	return out
}

// cutLast splits a schema path at its last dot.
func cutLast(path string) (parent, name string, ok bool) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", path, false
	}
	return path[:i], path[i+1:], true
}

// TestReferenceWritesEveryKey checks the generated reference names every
// table and key of the schema with its default: a renderer that dropped
// one would still generate a file equal to itself.
func TestReferenceWritesEveryKey(t *testing.T) {
	ref := string(Reference())
	for _, sec := range Schema() {
		_, body, ok := strings.Cut(ref, "\n## `"+sec.Header()+"`\n")
		if !ok {
			t.Errorf("no section %s", sec.Header())
			continue
		}
		body, _, _ = strings.Cut(body, "\n## ")
		for _, k := range sec.Keys {
			want := fmt.Sprintf("| `%s` | %s | %s |", k.Name, k.Kind, cell(defaultText(k)))
			if !strings.Contains(body, want) {
				t.Errorf("%s: no line starting %q", sec.Header(), want)
			}
		}
	}
}
