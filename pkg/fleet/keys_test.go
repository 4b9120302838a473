package fleet

import "testing"

// Every Redis key of a breaker parses back to its breaker key and field,
// braces in the breaker key included; keys of other prefixes, the
// membership documents and the marker do not.
func TestBreakerFieldParsesBackEveryKey(t *testing.T) {
	ks := keyspace{prefix: "l4lb:"}
	for _, key := range []string{"web/10.0.0.1:80", "web/[::1]:80", "a{b}/c}:d"} {
		for _, field := range []string{fieldGen, fieldOpen, fieldCool, fieldDisabled, fieldProbe} {
			got, f, ok := ks.breakerField(ks.key(key, field))
			if !ok || got != key || f != field {
				t.Errorf("breakerField(%q) = %q, %q, %v; want %q, %q", ks.key(key, field), got, f, ok, key, field)
			}
		}
	}
	for _, other := range []string{"other:{web/10.0.0.1:80}:gen", "l4lb:fleet", "l4lb:{members}", "l4lb:{web/x"} {
		if k, f, ok := ks.breakerField(other); ok {
			t.Errorf("breakerField(%q) = %q, %q: not a breaker key", other, k, f)
		}
	}
}
