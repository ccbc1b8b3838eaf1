package kube

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

const (
	install   = "meshplane"
	ns        = "bookinfo"
	networkV1 = "networking.istio.io/v1"
)

var (
	drGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
	vsGVR = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
)

func dr(name, spec string) *snapshotv1.Object {
	return &snapshotv1.Object{ApiVersion: networkV1, Kind: "DestinationRule", Namespace: ns, Name: name, Spec: []byte(spec)}
}

func drKey(name string) domain.ObjectKey {
	return domain.ObjectKey{APIVersion: networkV1, Kind: "DestinationRule", Namespace: ns, Name: name}
}

func vsKey(name string) domain.ObjectKey {
	return domain.ObjectKey{APIVersion: networkV1, Kind: "VirtualService", Namespace: ns, Name: name}
}

func get(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

func exists(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) bool {
	t.Helper()
	_, err := dyn.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return true
}

func host(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	h, _, err := unstructured.NestedString(u.Object, "spec", "host")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// appliedBy reports whether manager holds fields of u through server-side
// apply.
func appliedBy(u *unstructured.Unstructured, manager string) bool {
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// heldMetrics records the held deletions of the latest apply.
type heldMetrics struct {
	app.NopMetrics
	n int
}

func (m *heldMetrics) HeldDeletions(n int) { m.n = n }

type ackRelay struct{ acks [][]*snapshotv1.ApplyResult }

func (r *ackRelay) OpenPush(context.Context) (app.PushStream, error) {
	return nil, errors.New("not used")
}
func (r *ackRelay) Watch(context.Context, string) (app.WatchStream, error) {
	return nil, errors.New("not used")
}
func (r *ackRelay) Ack(_ context.Context, _ string, results []*snapshotv1.ApplyResult) error {
	r.acks = append(r.acks, results)
	return nil
}

func TestApplier(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	createNamespace(t, c.Clientset(), ns)
	dyn := c.Dynamic()
	a := NewApplier(metadataClient(t, c), c.Mapper(), install, "east")
	apply := func(t *testing.T, obj *snapshotv1.Object) error {
		t.Helper()
		return applyVia(t, a, obj, install, "east")
	}

	// Objects Meshplane must never touch: a user's, one that another
	// cluster's agent owns, and one of another install. The user's
	// resources are written by another field manager, as kubectl would.
	if err := c.ApplyYAML(t.Context(), []byte(`
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: bookinfo}
spec: {host: ratings.user.example}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: west-reviews
  namespace: bookinfo
  labels: {meshplane.dev/managed-by: meshplane, meshplane.dev/cluster: west}
spec: {host: reviews.west.example}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: other-install
  namespace: bookinfo
  labels: {meshplane.dev/managed-by: staging, meshplane.dev/cluster: east}
spec: {host: reviews.staging.example}
`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	untouchable := map[string]string{} // name -> resourceVersion
	for _, n := range []string{"ratings", "west-reviews", "other-install"} {
		untouchable[n] = get(t, dyn, drGVR, n).GetResourceVersion()
	}
	checkUntouched := func(t *testing.T) {
		t.Helper()
		for n, rv := range untouchable {
			u, err := dyn.Resource(drGVR).Namespace(ns).Get(t.Context(), n, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: %v (Meshplane deleted an object it does not own)", n, err)
				continue
			}
			if u.GetResourceVersion() != rv {
				t.Errorf("%s changed (resourceVersion %s -> %s): %v", n, rv, u.GetResourceVersion(), u.Object)
			}
		}
	}

	t.Run("apply creates the object with ownership labels and the field manager", func(t *testing.T) {
		obj := dr("reviews", `{"host":"reviews.bookinfo.svc.cluster.local","trafficPolicy":{"tls":{"mode":"ISTIO_MUTUAL"}}}`)
		// Translation's labels are kept, but ownership is the agent's to
		// set, whatever translation sent.
		obj.Labels = map[string]string{"app": "reviews", snapshots.LabelCluster: "west", snapshots.LabelManagedBy: "someone"}
		obj.Annotations = map[string]string{snapshots.AnnotationParents: "TrafficPolicy bookinfo/reviews"}
		if err := apply(t, obj); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		u := get(t, dyn, drGVR, "reviews")
		wantLabels := map[string]string{"app": "reviews", snapshots.LabelManagedBy: install, snapshots.LabelCluster: "east"}
		for k, v := range wantLabels {
			if got := u.GetLabels()[k]; got != v {
				t.Errorf("label %s = %q, want %q", k, got, v)
			}
		}
		if got := u.GetAnnotations()[snapshots.AnnotationParents]; got != "TrafficPolicy bookinfo/reviews" {
			t.Errorf("parents annotation = %q", got)
		}
		if h := host(t, u); h != "reviews.bookinfo.svc.cluster.local" {
			t.Errorf("spec.host = %q", h)
		}
		if mode, _, _ := unstructured.NestedString(u.Object, "spec", "trafficPolicy", "tls", "mode"); mode != "ISTIO_MUTUAL" {
			t.Errorf("spec.trafficPolicy.tls.mode = %q", mode)
		}
		if !appliedBy(u, snapshots.FieldManager) {
			t.Errorf("no server-side apply entry for field manager %q in %v", snapshots.FieldManager, u.GetManagedFields())
		}
	})

	t.Run("re-apply with a changed spec updates the object", func(t *testing.T) {
		before := get(t, dyn, drGVR, "reviews")
		if err := apply(t, dr("reviews", `{"host":"reviews.bookinfo.svc.cluster.local","subsets":[{"name":"v1","labels":{"version":"v1"}}]}`)); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		u := get(t, dyn, drGVR, "reviews")
		if u.GetUID() != before.GetUID() {
			t.Errorf("the object was replaced, not updated")
		}
		if u.GetGeneration() <= before.GetGeneration() {
			t.Errorf("generation %d -> %d, want an update", before.GetGeneration(), u.GetGeneration())
		}
		subsets, _, _ := unstructured.NestedSlice(u.Object, "spec", "subsets")
		if len(subsets) != 1 {
			t.Errorf("spec.subsets = %v, want one subset", subsets)
		}
		// Fields Meshplane no longer applies are removed.
		if _, found, _ := unstructured.NestedMap(u.Object, "spec", "trafficPolicy"); found {
			t.Errorf("spec.trafficPolicy is still set after it was dropped from the applied spec")
		}
		if _, found := u.GetAnnotations()[snapshots.AnnotationParents]; found {
			t.Errorf("the parents annotation is still set after it was dropped")
		}
		if u.GetLabels()[snapshots.LabelManagedBy] != install || u.GetLabels()[snapshots.LabelCluster] != "east" {
			t.Errorf("ownership labels lost: %v", u.GetLabels())
		}
	})

	t.Run("an object without ownership labels is the user's: conflict", func(t *testing.T) {
		for _, name := range []string{"ratings", "west-reviews", "other-install"} {
			err := apply(t, dr(name, `{"host":"hijacked.example"}`))
			if !errors.Is(err, app.ErrConflict) {
				t.Errorf("Apply over %s = %v, want ErrConflict", name, err)
			}
			// A view that has not seen the object yet: the API server
			// refuses the apply, which is not forced.
			d := domain.Desire([]*snapshotv1.Object{dr(name, `{"host":"hijacked.example"}`)}, install, "east")[0]
			if _, err := a.Apply(t.Context(), d, nil); !errors.Is(err, app.ErrConflict) {
				t.Errorf("Apply over %s with a view behind = %v, want ErrConflict", name, err)
			}
		}
		checkUntouched(t)
	})

	t.Run("a spec that violates the CRD schema is rejected", func(t *testing.T) {
		// A missing required field fails validation (422 Invalid). A wrong
		// type already fails building the typed apply patch, which the API
		// server answers with a 500 that names the field.
		tests := []struct {
			name, spec string
			want       func(*apierrors.StatusError) bool
		}{
			{"no-host", `{"subsets":[{"name":"v1"}]}`, func(s *apierrors.StatusError) bool { return apierrors.IsInvalid(s) }},
			{"host-not-a-string", `{"host":42}`, func(s *apierrors.StatusError) bool {
				return strings.Contains(s.ErrStatus.Message, ".spec.host: expected string")
			}},
			{"subsets-not-a-list", `{"host":"h.example","subsets":"v1"}`, func(s *apierrors.StatusError) bool {
				return strings.Contains(s.ErrStatus.Message, ".spec.subsets: expected list")
			}},
		}
		for _, tt := range tests {
			err := apply(t, dr(tt.name, tt.spec))
			var status *apierrors.StatusError
			switch {
			case err == nil:
				t.Errorf("Apply %s: want an error", tt.name)
			case errors.Is(err, app.ErrConflict):
				t.Errorf("Apply %s = %v: a rejection is not a conflict", tt.name, err)
			case !errors.As(err, &status):
				t.Errorf("Apply %s = %v, want the API server's refusal", tt.name, err)
			case !tt.want(status):
				t.Errorf("Apply %s = %v (code %d, reason %q): not the refusal expected", tt.name, err, status.ErrStatus.Code, status.ErrStatus.Reason)
			}
			if exists(t, dyn, drGVR, tt.name) {
				t.Errorf("%s was created despite the error", tt.name)
			}
		}
	})

	t.Run("objects that cannot be applied", func(t *testing.T) {
		tests := []struct {
			name string
			obj  *snapshotv1.Object
		}{
			{"unknown kind", &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "NoSuchKind", Namespace: ns, Name: "x", Spec: []byte(`{}`)}},
			{"bad apiVersion", &snapshotv1.Object{ApiVersion: "a/b/c", Kind: "DestinationRule", Namespace: ns, Name: "x", Spec: []byte(`{}`)}},
			{"spec is not JSON", dr("broken", `{host:`)},
		}
		for _, tt := range tests {
			if err := apply(t, tt.obj); err == nil {
				t.Errorf("%s: Apply = nil, want an error", tt.name)
			}
		}
	})

	t.Run("Owned lists only this install's and cluster's objects", func(t *testing.T) {
		vs := &snapshotv1.Object{ApiVersion: networkV1, Kind: "VirtualService", Namespace: ns, Name: "reviews",
			Spec: []byte(`{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews","subset":"v1"}}]}]}`)}
		if err := apply(t, vs); err != nil {
			t.Fatalf("Apply VirtualService: %v", err)
		}
		want := []domain.ObjectKey{drKey("reviews"), vsKey("reviews")}
		kubetest.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
			return slices.Equal(ownedKeys(a), want), nil
		}, "Owned = %v, want %v", ownedKeys(a), want)
		// Another cluster's agent of the same install sees only its own.
		westA := NewApplier(metadataClient(t, c), c.Mapper(), install, "west")
		if err := westA.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, want := ownedKeys(westA), []domain.ObjectKey{drKey("west-reviews")}; !slices.Equal(got, want) {
			t.Errorf("west's Owned = %v, want %v", got, want)
		}
	})

	t.Run("Delete removes owned objects and refuses others", func(t *testing.T) {
		if err := apply(t, dr("to-delete", `{"host":"gone.example"}`)); err != nil {
			t.Fatal(err)
		}
		u := get(t, dyn, drGVR, "to-delete")
		live := domain.LiveObject{Key: drKey("to-delete"), UID: string(u.GetUID()), Owned: true}
		if err := a.Delete(t.Context(), live); err != nil {
			t.Fatalf("Delete owned: %v", err)
		}
		if exists(t, dyn, drGVR, "to-delete") {
			t.Errorf("owned object still exists after Delete")
		}
		if err := a.Delete(t.Context(), live); err != nil {
			t.Errorf("Delete of an object already gone = %v, want nil", err)
		}
		for _, name := range []string{"ratings", "west-reviews", "other-install"} {
			u := get(t, dyn, drGVR, name)
			// As the view holds it, and as a view behind that took it
			// for Meshplane's: the resource version has moved on, and
			// the API server's copy decides.
			for _, l := range []domain.LiveObject{
				{Key: drKey(name), UID: string(u.GetUID()), ResourceVersion: u.GetResourceVersion()},
				{Key: drKey(name), UID: string(u.GetUID()), ResourceVersion: "1", Owned: true},
			} {
				if err := a.Delete(t.Context(), l); !errors.Is(err, app.ErrConflict) {
					t.Errorf("Delete %s (%+v) = %v, want a refusal wrapping ErrConflict", name, l, err)
				}
			}
		}
		checkUntouched(t)
	})

	t.Run("the syncer's garbage collection deletes only obsolete owned objects", func(t *testing.T) {
		relay := &ackRelay{}
		held := &heldMetrics{}
		s := app.NewSyncer(relay, a, held, slog.New(slog.NewTextHandler(io.Discard, nil)), app.WithApplyOptions(app.ApplyOptions{Install: install, Cluster: "east"}))
		if err := s.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}

		// An output built without west's input updates what it holds but
		// deletes nothing: the VirtualService stays, and the ack says so.
		incomplete := &snapshotv1.OutputSnapshot{Cluster: "east", MissingClusters: []string{"west"}, Objects: []*snapshotv1.Object{
			dr("reviews", `{"host":"reviews.bookinfo.svc.cluster.local","trafficPolicy":{"tls":{"mode":"ISTIO_MUTUAL"}}}`),
		}}
		snapshots.SealOutput(incomplete)
		if !exists(t, dyn, vsGVR, "reviews") {
			t.Fatal("the test needs the owned VirtualService reviews to exist")
		}
		if !s.Apply(t.Context(), incomplete) {
			t.Fatalf("Apply of the incomplete snapshot reported a failure: %v", relay.acks)
		}
		if !exists(t, dyn, vsGVR, "reviews") {
			t.Fatal("an output built without west's input deleted the owned VirtualService")
		}
		got, err := dyn.Resource(drGVR).Namespace(ns).Get(t.Context(), "reviews", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if mode, _, _ := unstructured.NestedString(got.Object, "spec", "trafficPolicy", "tls", "mode"); mode != "ISTIO_MUTUAL" {
			t.Fatalf("the incomplete output's update was not applied: tls mode %q", mode)
		}
		var heldRefs []string
		for _, r := range relay.acks[len(relay.acks)-1] {
			switch r.GetOutcome() {
			case snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETION_HELD:
				heldRefs = append(heldRefs, r.GetRef().GetKind()+"/"+r.GetRef().GetName())
			case snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED:
				t.Fatalf("the incomplete output's ack reports a deletion: %v", r)
			}
		}
		if !slices.Contains(heldRefs, "VirtualService/reviews") || held.n != len(heldRefs) {
			t.Fatalf("held deletions in the ack %v, metric %d; want VirtualService/reviews among them, and the metric to count them", heldRefs, held.n)
		}

		snap := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: []*snapshotv1.Object{
			dr("reviews", `{"host":"reviews.bookinfo.svc.cluster.local"}`),
		}}
		snapshots.SealOutput(snap)
		if !s.Apply(t.Context(), snap) {
			t.Fatalf("Apply reported a failure: %v", relay.acks)
		}
		if exists(t, dyn, vsGVR, "reviews") {
			t.Errorf("the obsolete owned VirtualService was not deleted")
		}
		if held.n != 0 {
			t.Errorf("held deletions metric %d after a complete output, want 0", held.n)
		}
		if !exists(t, dyn, drGVR, "reviews") {
			t.Errorf("the desired DestinationRule was deleted")
		}
		checkUntouched(t)

		// An empty snapshot removes every owned object and nothing else.
		empty := &snapshotv1.OutputSnapshot{Cluster: "east"}
		snapshots.SealOutput(empty)
		if !s.Apply(t.Context(), empty) {
			t.Fatalf("Apply of the empty snapshot reported a failure: %v", relay.acks)
		}
		kubetest.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
			return len(ownedKeys(a)) == 0, nil
		}, "owned after an empty snapshot = %v; want none", ownedKeys(a))
		checkUntouched(t)
	})
}

func metadataClient(t testing.TB, c *kubetest.Cluster) metadata.Interface {
	t.Helper()
	md, err := metadata.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// applyVia applies obj as the syncer would: as it desires it, with what
// the view holds.
func applyVia(t *testing.T, a *Applier, obj *snapshotv1.Object, install, cluster string) error {
	t.Helper()
	d := domain.Desire([]*snapshotv1.Object{obj}, install, cluster)[0]
	var live *domain.LiveObject
	if l, ok := a.Get(d.Key); ok {
		live = &l
	}
	_, err := a.Apply(t.Context(), d, live)
	return err
}

func ownedKeys(a *Applier) []domain.ObjectKey {
	var out []domain.ObjectKey
	for _, l := range a.Owned() {
		out = append(out, l.Key)
	}
	slices.SortFunc(out, compareKeys)
	return out
}

func compareKeys(x, y domain.ObjectKey) int {
	switch {
	case x.String() < y.String():
		return -1
	case x.String() > y.String():
		return 1
	}
	return 0
}
