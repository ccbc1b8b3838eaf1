package web

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// firstLoadBudget is what a browser may fetch, gzipped, before the first
// page shows (issue 20): index.html and what it loads at once. Pages
// loaded on demand (the graph, with Cytoscape) are not part of it.
const firstLoadBudget = 500_000

var assetRef = regexp.MustCompile(`(?:src|href)="/(assets/[^"]+)"`)

// The embedded build is whole (index.html and every asset it names), and
// its first load stays under the budget.
func TestFirstLoadUnderBudget(t *testing.T) {
	root := FS()
	index, err := fs.ReadFile(root, "index.html")
	if err != nil {
		t.Fatalf("the embedded build has no index.html: run 'make web' (%v)", err)
	}
	total := gzipped(t, index)
	refs := assetRef.FindAllStringSubmatch(string(index), -1)
	if len(refs) == 0 {
		t.Fatalf("index.html loads no assets:\n%s", index)
	}
	for _, m := range refs {
		data, err := fs.ReadFile(root, m[1])
		if err != nil {
			t.Fatalf("index.html names %s, which the build lacks: %v", m[1], err)
		}
		n := gzipped(t, data)
		t.Logf("%s: %d bytes, %d gzipped", m[1], len(data), n)
		total += n
	}
	t.Logf("first load: %d bytes gzipped (budget %d)", total, firstLoadBudget)
	if total > firstLoadBudget {
		t.Errorf("the first load is %d bytes gzipped, over the budget of %d", total, firstLoadBudget)
	}
}

// Everything the pages load comes from the console: no asset names another
// origin, so the Content-Security-Policy's 'self' holds and no CDN is
// needed.
func TestNoOtherOrigins(t *testing.T) {
	err := fs.WalkDir(FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(FS(), path)
		if err != nil {
			return err
		}
		for _, bad := range []string{`src="http`, `href="http`, `@import url(http`, `//fonts.googleapis`, `//cdn.`, `//unpkg.`} {
			if bytes.Contains(data, []byte(bad)) {
				t.Errorf("%s loads from another origin (%q)", path, bad)
			}
		}
		if strings.HasSuffix(path, ".html") && bytes.Contains(data, []byte("<script>")) {
			t.Errorf("%s has an inline script, which the CSP refuses", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func gzipped(t *testing.T, data []byte) int {
	t.Helper()
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Len()
}
