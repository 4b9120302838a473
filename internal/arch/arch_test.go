package arch

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/l4lb/l4lb/"

// leaves are the packages that import no other package of the module
// (beyond the ones listed).
var leaves = map[string][]string{
	"pkg/splice":    {"pkg/rawsys"},
	"pkg/rawsys":    nil,
	"pkg/reactor":   {"pkg/clock", "pkg/rawsys"},
	"pkg/loopguard": nil,
	"pkg/hashring":  nil,
	"pkg/breaker":   nil,
	"pkg/health":    nil,
	"pkg/pick":      {"pkg/hashring"},
	"pkg/dialer":    nil,
	"pkg/listener":  nil,
	"pkg/config":    nil,
	"pkg/sdnotify":  nil,
	"pkg/fleet":     {"pkg/breaker"},
	"pkg/sockopt":   nil,

	"pkg/proxyproto": nil,

	"pkg/srclimit": nil,
}

// fenced third-party modules and the directories allowed to import them.
var fenced = map[string][]string{
	"github.com/BurntSushi/toml":          {"cmd/", "pkg/config"},
	"github.com/prometheus/client_golang": {"cmd/", "pkg/admin"},
	"github.com/redis/rueidis":            {"pkg/fleet"},
}

// imports maps each directory (relative to the repo) to the imports of its
// non-test Go files.
func imports(t *testing.T) map[string][]string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[rel] = append(out[rel], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDependencyDirection(t *testing.T) {
	all := imports(t)
	if len(all["pkg/splice"]) == 0 || len(all["cmd/l4lb"]) == 0 {
		t.Fatal("did not find the module's packages")
	}
	for dir, imps := range all {
		for _, imp := range imps {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			target := strings.TrimPrefix(imp, module)
			if allowed, isLeaf := leaves[dir]; isLeaf && !contains(allowed, target) {
				t.Errorf("%s is a leaf package but imports %s", dir, target)
			}
			if strings.HasPrefix(dir, "pkg/") && (strings.HasPrefix(target, "cmd/") || strings.HasPrefix(target, "bench")) {
				t.Errorf("%s imports %s: pkg/ never depends on commands", dir, target)
			}
		}
	}
}

func TestFencedDependencies(t *testing.T) {
	for dir, imps := range imports(t) {
		for _, imp := range imps {
			for mod, allowed := range fenced {
				if !strings.HasPrefix(imp, mod) {
					continue
				}
				ok := false
				for _, a := range allowed {
					ok = ok || strings.HasPrefix(dir+"/", a) || dir == a
				}
				if !ok {
					t.Errorf("%s imports %s; only %v may", dir, imp, allowed)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
