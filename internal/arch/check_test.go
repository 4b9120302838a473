package arch

import (
	"slices"
	"strings"
	"testing"
)

// The checker must fail on each kind of break, or TestPackageRules could
// pass on a tree that breaks the rules.
func TestCheckCatchesBreaks(t *testing.T) {
	good := func() graph {
		g := graph{}
		for name, uses := range rules {
			g[name] = pkgInfo{imports: slices.Clone(uses), deps: slices.Clone(uses)}
		}
		return g
	}
	if p := check(good()); len(p) != 0 {
		t.Fatalf("a graph that follows the rules fails: %v", p)
	}
	cases := []struct {
		name   string
		break_ func(graph)
		want   string
	}{
		{"unclassified package", func(g graph) { g["pkg/newthing"] = pkgInfo{} }, "pkg/newthing: not classified"},
		{"import against the rule", func(g graph) {
			p := g["pkg/splice"]
			p.imports = append(p.imports, "pkg/pool")
			g["pkg/splice"] = p
		}, "pkg/splice imports pkg/pool"},
		{"fenced module", func(g graph) {
			p := g["pkg/pool"]
			p.imports = append(p.imports, "github.com/redis/rueidis")
			g["pkg/pool"] = p
		}, "only pkg/fleet may"},
		{"transitive bad dependency of the data path", func(g graph) {
			p := g["pkg/pool"]
			p.deps = append(p.deps, "net/http")
			g["pkg/pool"] = p
		}, "pkg/pool is on the data path but depends on net/http"},
		{"transitive test-only dependency", func(g graph) {
			p := g["pkg/admin"]
			p.deps = append(p.deps, "internal/testnet")
			g["pkg/admin"] = p
		}, "pkg/admin depends on internal/testnet"},
		{"classified package gone", func(g graph) { delete(g, "pkg/splice") }, "pkg/splice: classified but no such package"},
	}
	for _, c := range cases {
		g := good()
		c.break_(g)
		problems := check(g)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s: want a problem containing %q, got %v", c.name, c.want, problems)
		}
	}
}
