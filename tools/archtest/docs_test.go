package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docFiles are the Markdown files a user reads: the README, docs/ and the
// charts' READMEs.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "deploy/charts/*/README.md", "clients/ts/README.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksExist: every relative link in the docs names a file or
// directory of the repository (anchors aside).
func TestDocsLinksExist(t *testing.T) {
	root := repoRoot(t)
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
			}
		}
	}
}

var docFlag = regexp.MustCompile("`--([a-z0-9][a-z0-9-]*)")

// TestDocsFlagsExist: every flag that docs/configuration.md's tables list
// is a name the code can register: a lower-case string literal passed to a
// call in the code that is not a test (the flag helpers take the name as
// a literal), or two of them joined by a dash (a flag set's prefix such as
// "translation" and a client flag's name). A flag that was renamed or removed from the code
// while the docs kept it fails here.
func TestDocsFlagsExist(t *testing.T) {
	root := repoRoot(t)
	names := flagNames(t, root)
	known := func(flag string) bool {
		if names[flag] {
			return true
		}
		// A prefixed flag set: platform.NewFlags(fs, "redis") registers
		// "addrs" as --redis-addrs.
		for i := range len(flag) {
			if flag[i] == '-' && names[flag[:i]] && names[flag[i+1:]] {
				return true
			}
		}
		return false
	}
	b, err := os.ReadFile(filepath.Join(root, "docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, m := range docFlag.FindAllStringSubmatch(cells[1], -1) {
			checked++
			if !known(m[1]) {
				t.Errorf("docs/configuration.md:%d lists --%s, which the code does not register", i+1, m[1])
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d flags in docs/configuration.md: its tables changed shape", checked)
	}
	// The scan itself: a flag no code registers must fail.
	if known("no-such-flag-anywhere") {
		t.Fatal("the scan accepts a flag no code registers")
	}
}

var flagName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// flagNames returns the lower-case string literals (letters, digits and
// dashes) passed to calls in the repository's non-test Go code.
func flagNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "gen", ".git", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && flagName.MatchString(s) {
						names[s] = true
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
