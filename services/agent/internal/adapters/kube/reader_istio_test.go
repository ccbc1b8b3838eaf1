package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

const istioObjectsYAML = `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews-canary
  namespace: bookinfo
spec:
  hosts: [reviews, reviews.bookinfo.svc.cluster.local]
  exportTo: ["."]
  http:
  - route:
    - destination:
        host: reviews
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: ratings-tls
  namespace: bookinfo
  labels:
    team: ratings
spec:
  host: ratings.bookinfo.svc.cluster.local
  trafficPolicy:
    tls:
      mode: ISTIO_MUTUAL
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
  namespace: bookinfo
  labels:
    meshplane.dev/managed-by: meshplane
    meshplane.dev/cluster: east
spec:
  host: reviews.bookinfo.svc.cluster.local
`

func userObjectNames(s *snapshotv1.InputSnapshot) []string {
	var out []string
	for _, o := range s.GetUserIstioObjects() {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()+" hosts="+strings.Join(o.GetHosts(), ",")+" exportTo="+strings.Join(o.GetExportTo(), ","))
	}
	return out
}

// The users' VirtualServices and DestinationRules reach the snapshot with
// their hosts and exportTo; Meshplane's own (managed-by this install) do
// not, and the cache keeps only what conflict detection reads.
func TestReaderUserIstioObjects(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	f := fixture{t: t, cs: c.Clientset()}
	f.namespace("bookinfo", nil)
	if err := c.ApplyYAML(t.Context(), []byte(istioObjectsYAML)); err != nil {
		t.Fatalf("apply Istio objects: %v", err)
	}
	r := startReader(t, c, Options{})
	want := []string{
		"DestinationRule bookinfo/ratings-tls hosts=ratings.bookinfo.svc.cluster.local exportTo=",
		"VirtualService bookinfo/reviews-canary hosts=reviews,reviews.bookinfo.svc.cluster.local exportTo=.",
	}
	var got []string
	kubetest.Eventually(t, waitTimeout, func(context.Context) (bool, error) {
		got = userObjectNames(snapshot(t, r))
		return slices.Equal(got, want), nil
	}, "the user Istio objects")

	for _, inf := range r.istio {
		objs, err := inf.lister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			u := o.(*unstructured.Unstructured)
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "http"); found {
				t.Errorf("%s %s: the cache holds spec.http; the transform must drop it", inf.kind, u.GetName())
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "trafficPolicy"); found {
				t.Errorf("%s %s: the cache holds spec.trafficPolicy; the transform must drop it", inf.kind, u.GetName())
			}
			if u.GetLabels()["team"] != "" {
				t.Errorf("%s %s: the cache holds labels other than managed-by", inf.kind, u.GetName())
			}
		}
	}

	// A user object deleted leaves the snapshot.
	if err := c.Dynamic().Resource(istioKinds[0].gvr).Namespace("bookinfo").Delete(t.Context(), "reviews-canary", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, waitTimeout, func(context.Context) (bool, error) {
		return slices.Equal(userObjectNames(snapshot(t, r)), want[:1]), nil
	}, "the deletion of the user VirtualService")
}

// An agent that starts before Istio's CRDs exist discovers the users'
// objects once the CRDs appear.
func TestReaderLateIstioCRDs(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east", SkipIstioCRDs: true})
	f := fixture{t: t, cs: c.Clientset()}
	f.namespace("bookinfo", nil)
	r := startReader(t, c, Options{CRDPollInterval: 100 * time.Millisecond})
	if got := userObjectNames(snapshot(t, r)); len(got) != 0 {
		t.Fatalf("user objects before Istio's CRDs exist: %q", got)
	}
	crds, err := kubetest.IstioCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyYAML(t.Context(), crds); err != nil {
		t.Fatalf("install Istio CRDs: %v", err)
	}
	if err := c.ApplyYAML(t.Context(), []byte(istioObjectsYAML)); err != nil {
		t.Fatalf("apply Istio objects: %v", err)
	}
	kubetest.Eventually(t, 3*waitTimeout, func(context.Context) (bool, error) {
		return len(userObjectNames(snapshot(t, r))) == 2, nil
	}, "the user Istio objects applied after the CRDs appeared")
}
