package arch

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/l4lb/l4lb"

// pkgInfo is one package as `go list` sees it, module packages named
// relative to the module ("pkg/relay"), others in full.
type pkgInfo struct {
	imports []string // direct imports of its non-test files
	deps    []string // every package it depends on, transitively
}

type graph map[string]pkgInfo

// loadGraph asks the go command for the module's import graph.
func loadGraph(t *testing.T) graph {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		parts := strings.Split(strings.TrimSpace(line), "|")
		if len(parts) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		g[rel(parts[0])] = pkgInfo{imports: rels(parts[1]), deps: rels(parts[2])}
	}
	if len(g) < 10 {
		t.Fatalf("go list found only %d packages", len(g))
	}
	return g
}

func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

func rels(list string) []string {
	var out []string
	for _, p := range strings.Fields(list) {
		out = append(out, rel(p))
	}
	return out
}

// inModule reports whether p (as rel names it) is a package of the module:
// they all live under these roots.
func inModule(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return slices.Contains([]string{"pkg", "cmd", "internal", "bench", "e2e"}, first)
}

// check returns every way g breaks the rules.
func check(g graph) []string {
	var problems []string
	for name, p := range g {
		allowed, known := rules[name]
		if !known {
			problems = append(problems, name+": not classified in internal/arch rules_test.go")
			continue
		}
		for _, imp := range p.imports {
			if inModule(imp) && !slices.Contains(allowed, imp) {
				problems = append(problems, name+" imports "+imp+", which its rule does not allow")
			}
			for mod, who := range fenced {
				if strings.HasPrefix(imp, mod) && !slices.Contains(who, name) {
					problems = append(problems, name+" imports "+imp+"; only "+strings.Join(who, ", ")+" may")
				}
			}
		}
		for _, dep := range p.deps {
			if slices.Contains(testOnly, dep) && !slices.Contains(testOnly, name) {
				problems = append(problems, name+" depends on "+dep+", which is for tests only")
			}
			if slices.Contains(dataPath, name) {
				for _, bad := range badForDataPath {
					if dep == strings.TrimSuffix(bad, "/") || strings.HasPrefix(dep, bad) || strings.HasPrefix(module+"/"+dep, bad) {
						problems = append(problems, name+" is on the data path but depends on "+dep)
					}
				}
			}
		}
	}
	for name := range rules {
		if _, ok := g[name]; !ok {
			problems = append(problems, name+": classified but no such package")
		}
	}
	slices.Sort(problems)
	return problems
}

func TestPackageRules(t *testing.T) {
	for _, p := range check(loadGraph(t)) {
		t.Error(p)
	}
}
