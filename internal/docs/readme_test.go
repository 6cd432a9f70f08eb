// Package docs holds checks of the repository's documentation against
// its code.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// citedTest is how the README names a test, fuzz target or benchmark.
var citedTest = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*\b`)

// TestREADMENamesRealTests: every test, fuzz target and benchmark the
// README cites for a claim exists. A claim whose test was renamed or
// removed reads as held when nothing holds it.
func TestREADMENamesRealTests(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root:
			return fs.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				defined[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, name := range citedTest.FindAllString(string(readme), -1) {
		if !defined[name] && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if len(defined) == 0 || len(missing) > 0 {
		t.Fatalf("the README cites tests that do not exist (of %d defined): %s", len(defined), strings.Join(missing, ", "))
	}
}
