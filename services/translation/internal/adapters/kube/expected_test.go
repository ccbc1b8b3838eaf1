package kube_test

import (
	"context"
	"slices"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/translation/internal/adapters/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The expected clusters are the registered KubernetesClusters that
// registration mirrored for this install, read from a real API server.
func TestExpectedClusters(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{SkipIstioCRDs: true})
	ctx := t.Context()
	const ns = "meshplane"
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := c.Dynamic().Resource(kube.KubernetesClusters).Namespace(ns)
	put := func(name, install, owner, state string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("multicluster.meshplane.dev/v1")
		u.SetKind("KubernetesCluster")
		u.SetName(name)
		u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": owner, "meshplane.dev/install": install})
		u.Object["spec"] = map[string]any{"clusterName": name}
		created, err := res.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Object["status"] = map[string]any{"state": state}
		if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("west", "prod", "meshplane-registration", "STATE_REGISTERED")
	put("east", "prod", "meshplane-registration", "STATE_REGISTERED")
	put("gone", "prod", "meshplane-registration", "STATE_DEREGISTERED")
	put("pending", "prod", "meshplane-registration", "STATE_PENDING_APPROVAL")
	put("approved", "prod", "meshplane-registration", "STATE_APPROVED")
	put("other-install", "staging", "meshplane-registration", "STATE_REGISTERED")
	put("hand-made", "prod", "someone", "STATE_REGISTERED")

	got, err := kube.NewExpectedClusters(c.Dynamic(), ns, "prod").ExpectedClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"east", "west"}; !slices.Equal(got, want) {
		t.Fatalf("ExpectedClusters() = %v, want %v", got, want)
	}
	if got, err := kube.NewExpectedClusters(c.Dynamic(), "empty", "prod").ExpectedClusters(ctx); err != nil || len(got) != 0 {
		t.Fatalf("in a namespace without mirrors: %v, %v; want none", got, err)
	}
	if _, err := kube.NewExpectedClusters(c.Dynamic(), ns, "prod").ExpectedClusters(canceled(t)); err == nil {
		t.Fatal("a failed list gave no error")
	}
}

func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
