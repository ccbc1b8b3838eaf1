package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/test/e2e/harness"
)

// sharedTemplates are the templates the four service charts have in common.
// Helm has no sharing between sibling charts short of a library chart, so
// each chart carries a copy with its own name in the named templates (they
// are global across an umbrella). This test keeps the copies in step: change
// one, change all four.
var sharedTemplates = []string{
	"_helpers.tpl", "deployment.yaml", "service.yaml", "serviceaccount.yaml", "pdb.yaml",
	"servicemonitor.yaml", "networkpolicy.yaml", "certificate.yaml", "NOTES.txt",
}

func TestServiceChartsShareTemplates(t *testing.T) {
	root := filepath.Join(harness.RepoRoot(), "deploy", "charts")
	for _, f := range sharedTemplates {
		ref, err := os.ReadFile(filepath.Join(root, "registration", "templates", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range mgmtServices[1:] {
			got, err := os.ReadFile(filepath.Join(root, svc, "templates", f))
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.ReplaceAll(string(ref), "registration", svc); string(got) != want {
				t.Errorf("deploy/charts/%s/templates/%s differs from registration's copy (with the chart name replaced)", svc, f)
			}
		}
	}
}
