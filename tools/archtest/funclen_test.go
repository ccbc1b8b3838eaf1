package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds the length of every function outside tests and
// generated code. The longest today (registration's New, translation's
// translateAll, the demo's run) are within it; a function that outgrows
// it is split along its phases, as Incremental.update, emitFederation and
// CACerts.rotate were.
const maxFuncLines = 150

// TestFunctionLength: no hand-written function is longer than
// maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	files, longest := 0, 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "gen", "node_modules", "testdata", "bin", ".demo":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			longest = max(longest, n)
			if n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines long; split it along its phases (at most %d)", rel, fset.Position(fn.Pos()).Line, fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 200 {
		t.Fatalf("read only %d Go files under %s; is the repository intact?", files, root)
	}
	t.Logf("%d files; the longest function has %d lines", files, longest)
}
