package archtest

import (
	"go/ast"
	"go/token"
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
	longest := 0
	files := handWritten(t, false, func(rel string, fset *token.FileSet, f *ast.File) {
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
	})
	t.Logf("%d files; the longest function has %d lines", files, longest)
}
