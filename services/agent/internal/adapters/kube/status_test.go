package kube

import (
	"strconv"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var tpGVR = schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "trafficpolicies"}

func tpStatus(name string, gen int64, status string) *snapshotv1.ResourceStatus {
	return &snapshotv1.ResourceStatus{
		ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: ns, Name: name,
		ObservedGeneration: gen, Status: []byte(status),
	}
}

func TestStatusWriter(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	createNamespace(t, c.Clientset(), ns)
	dyn := c.Dynamic()
	if err := c.ApplyYAML(t.Context(), []byte(`
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: retries, namespace: bookinfo}
spec: {}
`)); err != nil {
		t.Fatal(err)
	}
	w := NewStatusWriter(dyn, c.Mapper())
	write := func(st *snapshotv1.ResourceStatus) app.StatusOutcome {
		t.Helper()
		got, err := w.WriteStatus(t.Context(), st)
		if err != nil {
			t.Fatalf("WriteStatus(%s gen %d): %v", st.GetName(), st.GetObservedGeneration(), err)
		}
		return got
	}
	tp := get(t, dyn, tpGVR, "retries")
	gen := tp.GetGeneration()
	accepted := `{"state":"ACCEPTED","observedGeneration":` + strconv.FormatInt(gen, 10) + `,"workloads":[{"cluster":"east","name":"reviews-v1","namespace":"bookinfo"}]}`

	if got := write(tpStatus("retries", gen, accepted)); got != app.StatusWritten {
		t.Fatalf("first write = %v, want written", got)
	}
	tp = get(t, dyn, tpGVR, "retries")
	if state, _, _ := unstructured.NestedString(tp.Object, "status", "state"); state != "ACCEPTED" {
		t.Fatalf("status after write = %v", tp.Object["status"])
	}
	rv := tp.GetResourceVersion()

	// The same status again is not written: the resourceVersion stays.
	if got := write(tpStatus("retries", gen, accepted)); got != app.StatusCurrent {
		t.Fatalf("unchanged write = %v, want current", got)
	}
	if got := get(t, dyn, tpGVR, "retries").GetResourceVersion(); got != rv {
		t.Fatalf("resourceVersion %s -> %s for an unchanged status", rv, got)
	}

	// A status computed for an older generation is not written.
	tp.Object["spec"] = map[string]any{"policy": map[string]any{"retries": map[string]any{"attempts": int64(3)}}}
	if _, err := dyn.Resource(tpGVR).Namespace(ns).Update(t.Context(), tp, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update spec: %v", err)
	}
	if got := write(tpStatus("retries", gen, `{"state":"INVALID"}`)); got != app.StatusSkipped {
		t.Fatalf("stale write = %v, want skipped", got)
	}
	if state, _, _ := unstructured.NestedString(get(t, dyn, tpGVR, "retries").Object, "status", "state"); state != "ACCEPTED" {
		t.Fatalf("a stale status replaced the current one: %s", state)
	}

	// A resource that is gone is skipped.
	if got := write(tpStatus("gone", 1, accepted)); got != app.StatusSkipped {
		t.Fatalf("write to a missing resource = %v, want skipped", got)
	}

	// A status the API server rejects is an error with its message.
	_, err := w.WriteStatus(t.Context(), tpStatus("retries", gen+1, `{"state":"NOT-A-STATE"}`))
	if err == nil || !strings.Contains(err.Error(), "NOT-A-STATE") {
		t.Fatalf("invalid status: err = %v, want the API server's rejection", err)
	}

	// Only Meshplane resources get statuses.
	if _, err := w.WriteStatus(t.Context(), &snapshotv1.ResourceStatus{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: ns, Name: "x", Status: []byte(`{}`)}); err == nil {
		t.Fatal("wrote the status of an Istio object")
	}
}
