package charts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

// notesTemplate renders NOTES.txt into a ConfigMap: helm template leaves
// NOTES out, and helm install --dry-run needs a cluster.
const notesTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ tpl (.Files.Get "notes-under-test.txt") . | quote }}
`

// TestNotes checks the warnings and pointers that NOTES.txt prints.
func TestNotes(t *testing.T) {
	dir := t.TempDir()
	if err := copyTree(chartsDir(t), dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"meshplane", "registration", "agent"} {
		notes, err := os.ReadFile(filepath.Join(dir, c, "templates", "NOTES.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c, "notes-under-test.txt"), notes, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c, "templates", "zz-notes-under-test.yaml"), []byte(notesTemplate), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, chart, values string
		want, wantNot       []string
	}{
		{"umbrella defaults", "meshplane", "{}\n",
			[]string{"DEVELOPMENT CA", "bundled r-redis:6379", "r-registration-tls r-ingest-tls r-translation-tls r-distribution-tls", "frontDoor.type=none", "meshctl cluster register"}, nil},
		{"umbrella with a CA and cert-manager", "meshplane",
			"registration:\n  ca: {secretName: meshplane-ca}\nglobal:\n  tls:\n    certManager:\n      issuerRef: {name: ca}\nfrontDoor:\n  type: istio\n  hosts: [mp.example.com]\n",
			[]string{"Front door: istio on port 9900 for mp.example.com"}, []string{"DEVELOPMENT CA", "r-registration-tls"}},
		{"registration defaults", "registration", "{}\n", []string{"DEVELOPMENT CA", "r-registration-tls"}, nil},
		{"registration with a CA", "registration", "ca: {secretName: meshplane-ca}\n", nil, []string{"DEVELOPMENT CA"}},
		{"registration in plaintext", "registration", "tls: {plaintext: true}\n", []string{"tls.plaintext is on"}, nil},
		{"agent with two replicas and no token", "agent", "cluster: east\nrelayAddr: mp:9900\ncaBundle: x\nreplicas: 2\n",
			[]string{"cluster east", "no bootstrap token", "replicas > 1"}, nil},
		{"agent", "agent", agentRelayValues, []string{"registers with meshplane.example.com:9900"}, []string{"WARNING", "NOTE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runHelm(context.Background(), helmPath(t), "template", "r", filepath.Join(dir, tc.chart),
				"--show-only", "templates/zz-notes-under-test.yaml", "-f", valuesFile(t, tc.values))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			objs, err := kubetest.DecodeYAML([]byte(out))
			if err != nil || len(objs) != 1 {
				t.Fatalf("decode: %v\n%s", err, out)
			}
			notes := objs[0].Object["data"].(map[string]any)["notes"].(string)
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(notes, w) {
					t.Errorf("NOTES hold %q:\n%s", w, notes)
				}
			}
		})
	}
}
