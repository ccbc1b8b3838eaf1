// Package istioschema checks translation outputs against the Istio CRDs, as
// a real API server enforces them (OpenAPI schema and CEL rules): every
// object in the golden files is created with a server-side dry run. The
// golden test in the domain package proves that translation produces
// exactly those objects.
package istioschema

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

const goldenDir = "../../testdata/golden"

type goldenObject struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Spec        map[string]any    `json:"spec"`
}

var resources = map[string]string{
	"VirtualService":      "virtualservices",
	"DestinationRule":     "destinationrules",
	"AuthorizationPolicy": "authorizationpolicies",
	"PeerAuthentication":  "peerauthentications",
	"ServiceEntry":        "serviceentries",
	"Gateway":             "gateways",
	"WasmPlugin":          "wasmplugins",
}

func TestGoldenObjectsPassIstioCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*", "output.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden outputs found: %v", err)
	}
	cluster := kubetest.Start(t, kubetest.Options{Name: "istioschema", SkipMeshplaneCRDs: true})
	ctx := t.Context()
	namespaces := map[string]bool{"default": true}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]struct {
			Objects []goldenObject `json:"objects"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, clusterName := range slices.Sorted(func(yield func(string) bool) {
			for k := range doc {
				if !yield(k) {
					return
				}
			}
		}) {
			for _, o := range doc[clusterName].Objects {
				if !namespaces[o.Namespace] {
					_, err := cluster.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{})
					if err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatalf("create namespace %s: %v", o.Namespace, err)
					}
					namespaces[o.Namespace] = true
				}
				resource, ok := resources[o.Kind]
				if !ok {
					t.Fatalf("%s: unexpected kind %s", f, o.Kind)
				}
				gv, err := schema.ParseGroupVersion(o.APIVersion)
				if err != nil {
					t.Fatal(err)
				}
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": o.APIVersion,
					"kind":       o.Kind,
					"metadata":   map[string]any{"name": o.Name, "namespace": o.Namespace},
					"spec":       o.Spec,
				}}
				u.SetLabels(o.Labels)
				u.SetAnnotations(o.Annotations)
				_, err = cluster.Dynamic().Resource(gv.WithResource(resource)).Namespace(o.Namespace).
					Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
				if err != nil {
					t.Errorf("%s: %s %s/%s in %s is rejected: %v", f, o.Kind, o.Namespace, o.Name, clusterName, err)
				}
				checked++
			}
		}
	}
	t.Logf("%d objects from %d golden cases pass the Istio CRDs", checked, len(files))
}
