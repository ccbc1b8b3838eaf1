package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestErrorsComparedWithIs: an error is compared with a sentinel by
// errors.Is, never by == or !=, which miss the sentinel once anything
// wraps it (fmt.Errorf("...: %w", err) does, and most of our adapters
// wrap). What errorlint's comparison check finds, without type
// information: one side an error value (err, fooErr, x.Err()), the other
// a sentinel (ErrNotFound, io.EOF, context.Canceled, redis.Nil, errDown).
func TestErrorsComparedWithIs(t *testing.T) {
	found := 0
	handWritten(t, true, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			b, ok := n.(*ast.BinaryExpr)
			if !ok || (b.Op != token.EQL && b.Op != token.NEQ) {
				return true
			}
			if (errorValue(b.X) && sentinel(b.Y)) || (errorValue(b.Y) && sentinel(b.X)) {
				found++
				t.Errorf("%s:%d: an error compared with %s; use errors.Is", rel, fset.Position(b.Pos()).Line, b.Op)
			}
			return true
		})
	})
	if found > 0 {
		t.Logf("%d comparisons to change", found)
	}
}

// errorValue reports whether e reads as an error value: err, an
// identifier ending in Err, or a call of an Err method (ctx.Err()).
func errorValue(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "err" || strings.HasSuffix(e.Name, "Err")
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "Err" && len(e.Args) == 0
	}
	return false
}

// sentinel reports whether e names a sentinel error: ErrX or errX, or one
// of the standard library's and go-redis's that are not so named.
func sentinel(e ast.Expr) bool {
	name := ""
	switch e := e.(type) {
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		name = e.Sel.Name
		if x, ok := e.X.(*ast.Ident); ok {
			switch x.Name + "." + name {
			case "io.EOF", "context.Canceled", "context.DeadlineExceeded", "redis.Nil", "goredis.Nil":
				return true
			}
		}
	default:
		return false
	}
	if name == "err" {
		return false
	}
	return (strings.HasPrefix(name, "Err") || strings.HasPrefix(name, "err")) && len(name) > 3 && name[3] >= 'A' && name[3] <= 'Z'
}

// TestErrorComparisonRule holds the rule to what it must and must not
// find, so that it cannot pass by finding nothing.
func TestErrorComparisonRule(t *testing.T) {
	for src, want := range map[string]bool{
		"err == io.EOF":                           true,
		"err != snapshots.ErrNotFound":            true,
		"ctx.Err() != context.Canceled":           true,
		"runErr == errDown":                       true,
		"ErrNotFound == err":                      true,
		"err == redis.Nil":                        true,
		"err == nil":                              false,
		"err != nil":                              false,
		"code == connect.CodeNotFound":            false,
		"err.Error() == \"x\"":                    false,
		"kind == errorKind":                       false,
		"ctx.Err() == nil":                        false,
		"e.Reason == metav1.StatusReasonConflict": false,
	} {
		e, err := parser.ParseExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		b := e.(*ast.BinaryExpr)
		if got := (errorValue(b.X) && sentinel(b.Y)) || (errorValue(b.Y) && sentinel(b.X)); got != want {
			t.Errorf("%s: flagged %v, want %v", src, got, want)
		}
	}
}
