package arch

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/architecture.md's import graph from go list")

const architectureDoc = "../../docs/architecture.md"

// The package table and import graph of docs/architecture.md, between the
// packages markers: a first code block naming every package (a name at the
// start of a line, its job after it), a second one with each package's
// imports within the module.
const (
	beginMarker = "<!-- packages:begin -->"
	endMarker   = "<!-- packages:end -->"
)

// TestArchitectureDocMatchesGoList fails when docs/architecture.md names a
// package that does not exist, leaves one out, or draws an import graph
// other than the one go list reports. Run with -update-docs to redraw the
// graph; the package table's prose stays the author's.
func TestArchitectureDocMatchesGoList(t *testing.T) {
	g := loadGraph(t)
	raw, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	blocks, before, after, err := codeBlocks(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	if len(blocks) != 2 {
		t.Fatalf("docs/architecture.md: want 2 code blocks between the packages markers (the package table, the import graph), found %d", len(blocks))
	}
	listed := map[string]bool{}
	for line := range strings.Lines(blocks[0]) {
		if line != "" && line[0] != ' ' && line[0] != '\n' {
			listed[strings.Fields(line)[0]] = true
		}
	}
	for name := range g {
		if !listed[name] {
			t.Errorf("docs/architecture.md, package table: %s is missing", name)
		}
	}
	for name := range listed {
		if _, ok := g[name]; !ok {
			t.Errorf("docs/architecture.md, package table: %s is not a package of the module", name)
		}
	}
	want := importGraph(g)
	if *updateDocs {
		doc = before + "```\n" + blocks[0] + "```\n" + between(doc) + "```\n" + want + "```\n" + after
		if err := os.WriteFile(architectureDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if blocks[1] != want {
		t.Errorf("docs/architecture.md, import graph: differs from go list (%s); regenerate it with: go test ./internal/arch -run ArchitectureDoc -update-docs\nwant:\n%s", firstDiff(blocks[1], want), want)
	}
}

// importGraph draws each package's imports within the module, one line a
// package (the module's own prefix "pkg/" left out on the right), packages
// importing nothing of the module left out.
func importGraph(g graph) string {
	names := make([]string, 0, len(g))
	for name := range g {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		var imps []string
		for _, imp := range g[name].imports {
			if inModule(imp) {
				imps = append(imps, strings.TrimPrefix(imp, "pkg/"))
			}
		}
		if len(imps) == 0 {
			continue
		}
		slices.Sort(imps)
		fmt.Fprintf(&b, "%-28s -> %s\n", name, strings.Join(imps, ", "))
	}
	return b.String()
}

// codeBlocks returns the fenced code blocks between the markers, and the
// document before the first block and after the last one.
func codeBlocks(doc string) (blocks []string, before, after string, err error) {
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return nil, "", "", fmt.Errorf("no %s ... %s section", beginMarker, endMarker)
	}
	section := doc[i:j]
	first := strings.Index(section, "```\n")
	if first < 0 {
		return nil, "", "", fmt.Errorf("no code block in the packages section")
	}
	before = doc[:i+first]
	rest := section[first:]
	end := 0
	for {
		open := strings.Index(rest[end:], "```\n")
		if open < 0 {
			break
		}
		open += end + 4
		close := strings.Index(rest[open:], "```\n")
		if close < 0 {
			return nil, "", "", fmt.Errorf("a code block is not closed")
		}
		blocks = append(blocks, rest[open:open+close])
		end = open + close + 4
	}
	return blocks, before, doc[i+first+end:], nil
}

// between is the prose between the two code blocks of the section.
func between(doc string) string {
	i := strings.Index(doc, beginMarker)
	section := doc[i:strings.Index(doc, endMarker)]
	first := strings.Index(section, "```\n")
	close1 := strings.Index(section[first+4:], "```\n") + first + 8
	open2 := strings.Index(section[close1:], "```\n") + close1
	return section[close1:open2]
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d of the block: have %q, want %q", i+1, gl, wl)
		}
	}
	return "no line differs"
}
