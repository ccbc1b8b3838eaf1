package render_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"github.com/meshplane/meshplane/services/translation/render"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

// TestGoldenInputsRender: every translation golden input loads as-is and
// translates to the versions the domain gives for the same snapshots
// decoded on their own.
func TestGoldenInputsRender(t *testing.T) {
	paths, err := filepath.Glob("../testdata/golden/*/input.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(filepath.Dir(p)), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			in := &render.Inputs{}
			if err := render.Load(p, "", data, in); err != nil {
				t.Fatalf("Load: %v", err)
			}
			got, err := render.Translate(in.Snapshots, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := domain.Translate(decodeDirectly(t, data), domain.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d clusters, want %d", len(got), len(want))
			}
			for c, w := range want {
				if got[c].GetVersion() != w.GetVersion() {
					t.Errorf("cluster %s: version %s, want %s", c, got[c].GetVersion(), w.GetVersion())
				}
			}
		})
	}
}

func decodeDirectly(t *testing.T, data []byte) map[string]*snapshotv1.InputSnapshot {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(js, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]*snapshotv1.InputSnapshot{}
	for _, item := range list {
		in := &snapshotv1.InputSnapshot{}
		if err := protojson.Unmarshal(item, in); err != nil {
			t.Fatal(err)
		}
		snapshots.SealInput(in)
		out[in.GetCluster()] = in
	}
	return out
}

// TestLoadDir: the cluster of a manifest comes from its annotation, else
// from its subdirectory; other kinds are kept by cluster for discovery;
// the result translates.
func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("east/reviews.yaml", `apiVersion: discovery.meshplane.dev/v1
kind: Destination
metadata: {name: reviews-default-east, namespace: default}
spec:
  kubeService:
    ref: {name: reviews, namespace: default, cluster: east}
    ports: [{port: 9080, name: http}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: reviews-v1, namespace: default}
`)
	write("east/override.yaml", `apiVersion: discovery.meshplane.dev/v1
kind: Destination
metadata:
  name: ratings-default-west
  namespace: default
  annotations: {meshplane.dev/cluster: west}
spec:
  kubeService:
    ref: {name: ratings, namespace: default, cluster: west}
`)
	write("meshplane/timeout.json", `{"apiVersion":"networking.meshplane.dev/v1","kind":"TrafficPolicy",
 "metadata":{"name":"t","namespace":"default"},
 "spec":{"destinationSelector":[{"kubeServiceRefs":{"services":[{"name":"reviews","namespace":"default","cluster":"east"}]}}],"policy":{"requestTimeout":"3s"}}}`)
	write(".git/ignored.yaml", "not: [valid")
	write("README.md", "not read")

	in, err := render.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(in.Snapshots["east"].GetDestinations()); got != 1 {
		t.Errorf("east has %d destinations, want 1", got)
	}
	if got := in.Snapshots["west"].GetDestinations(); len(got) != 1 || got[0].GetMetadata().GetCluster() != "west" {
		t.Errorf("west destinations = %v, want ratings by annotation", got)
	}
	if objs := in.Objects["east"]; len(objs) != 1 || !strings.Contains(objs[0].Where, "reviews.yaml") || !strings.Contains(string(objs[0].JSON), `"reviews-v1"`) {
		t.Errorf("Objects[east] = %v, want the Deployment, for discovery", objs)
	}
	if len(in.Skipped) != 0 {
		t.Errorf("Skipped = %q", in.Skipped)
	}
	out, err := render.Translate(in.Snapshots, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var vs *render.Manifest
	for _, m := range render.Manifests(out["east"]) {
		if m.Kind == "VirtualService" {
			vs = &m
		}
	}
	if vs == nil || !strings.Contains(string(vs.Spec), `"timeout":"3s"`) || vs.Metadata.Labels[snapshots.LabelCluster] != "east" {
		t.Fatalf("east VirtualService = %+v", vs)
	}
	sts := render.Statuses(out["meshplane"])
	if len(sts) != 1 || sts[0].State != "ACCEPTED" || sts[0].Name != "t" {
		t.Errorf("statuses = %+v", sts)
	}
}

// TestLoadErrors: bad input names the file and the field.
func TestLoadErrors(t *testing.T) {
	tp := func(policy string) string {
		return "apiVersion: networking.meshplane.dev/v1\nkind: TrafficPolicy\nmetadata: {name: p, namespace: default}\nspec:\n  policy:\n" + policy
	}
	for _, tc := range []struct {
		name, cluster, content string
		want                   []string
	}{
		{"unknown field", "east", tp("    retries: {atempts: 3}\n"), []string{"f.yaml", "TrafficPolicy default/p", "field spec.policy.retries.atempts", `unknown field "atempts"`}},
		{"wrong type", "east", tp("    requestTimeout: [1]\n"), []string{"field spec.policy.requestTimeout"}},
		{"list element", "east", tp("    trafficShift: {destinations: [{weight: 1}, {weight: x}]}\n"), []string{"field spec.policy.trafficShift.destinations[1].weight"}},
		{"no cluster", "", tp("    requestTimeout: 1s\n"), []string{"no cluster", "meshplane.dev/cluster"}},
		{"api version", "east", "apiVersion: networking.meshplane.dev/v2\nkind: TrafficPolicy\nmetadata: {name: p}\n", []string{`field apiVersion is "networking.meshplane.dev/v2"`}},
		{"kind typo", "east", "apiVersion: networking.meshplane.dev/v1\nkind: TraficPolicy\nmetadata: {name: p}\n", []string{`field kind: "TraficPolicy" is not a Meshplane resource`}},
		{"no name", "east", "apiVersion: networking.meshplane.dev/v1\nkind: TrafficPolicy\nmetadata: {}\n", []string{"field metadata.name is empty"}},
		{"not yaml", "east", "a: [b\n", []string{"f.yaml", "not YAML"}},
		{"second document", "east", tp("    requestTimeout: 1s\n") + "---\n" + tp("    nope: 1\n"), []string{"f.yaml:8 (document 2)", "field spec.policy.nope"}},
		{"snapshot list", "", "- cluster: east\n  destinations: [{metadata: {name: d}, spec: {kubeServce: {}}}]\n", []string{"input snapshot 0", "field destinations[0].spec.kubeServce"}},
		{"snapshot without cluster", "", "- destinations: []\n", []string{"field cluster is empty"}},
		{"snapshot in another cluster's directory", "west", "- cluster: east\n", []string{`field cluster is "east"`, `cluster "west"`}},
		{"no kind", "east", "metadata: {name: p}\n", []string{"field kind is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := render.Load("f.yaml", tc.cluster, []byte(tc.content), &render.Inputs{})
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if strings.Contains(err.Error(), "\u00a0") || strings.Contains(err.Error(), ": :") {
				t.Errorf("error %q is not normalised", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadDirEmpty(t *testing.T) {
	if _, err := render.LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no Meshplane resources") {
		t.Fatalf("LoadDir of an empty directory: %v", err)
	}
	if _, err := render.LoadDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("LoadDir of a missing directory succeeded")
	}
}

// TestStatusesFederatingVirtualMesh: a VirtualMesh's status holds its
// federated destinations as a list and its per-mesh warnings in a map;
// both survive, and the warnings are summarised (issue 16 item 12).
func TestStatusesFederatingVirtualMesh(t *testing.T) {
	data, err := os.ReadFile("../testdata/golden/federation-selective/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := &render.Inputs{}
	if err := render.Load("input.yaml", "", data, in); err != nil {
		t.Fatal(err)
	}
	out, err := render.Translate(in.Snapshots, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var vm *render.Status
	for c := range out {
		for _, s := range render.Statuses(out[c]) {
			if s.Kind == "VirtualMesh" {
				vm = &s
			}
		}
	}
	if vm == nil {
		t.Fatal("no VirtualMesh status")
	}
	if vm.State != "ACCEPTED" {
		t.Errorf("state %q, want ACCEPTED", vm.State)
	}
	var st struct {
		Destinations []struct{ Name, Cluster string } `json:"destinations"`
		Meshes       map[string]json.RawMessage       `json:"meshes"`
	}
	if err := json.Unmarshal(vm.Status, &st); err != nil {
		t.Fatalf("status %s: %v", vm.Status, err)
	}
	if len(st.Destinations) == 0 || len(st.Meshes) == 0 {
		t.Errorf("status %s lost its destinations or meshes", vm.Status)
	}
	want := "mesh istiod-istio-system-north.istio-system: istiod's DNS proxying (ISTIO_META_DNS_CAPTURE) is off"
	if !slices.ContainsFunc(vm.Warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("warnings %q lack %q", vm.Warnings, want)
	}
}
