package kube

import (
	"context"
	"fmt"
	"slices"

	"github.com/meshplane/meshplane/services/translation/internal/app"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// KubernetesClusters is the resource registration mirrors its cluster
// records into.
var KubernetesClusters = schema.GroupVersionResource{Group: "multicluster.meshplane.dev", Version: "v1", Resource: "kubernetesclusters"}

// The labels registration puts on its mirrors: only those count, so a
// KubernetesCluster someone else wrote does not make translation wait.
const (
	labelManagedBy    = "app.kubernetes.io/managed-by"
	registrationOwner = "meshplane-registration"
	labelInstall      = "meshplane.dev/install"
	// stateRegistered is the mirror's status.state of a cluster that holds
	// (or held) a certificate and has not been deregistered.
	stateRegistered = "STATE_REGISTERED"
)

// ExpectedClusters names the registered clusters from registration's
// KubernetesCluster mirrors in one namespace of the management cluster.
// They outlive a lost Redis. Clusters pending approval, approved but never
// registered, or deregistered are not expected: their agents do not push.
type ExpectedClusters struct {
	client    dynamic.Interface
	namespace string
	install   string
}

var _ app.ExpectedClusters = (*ExpectedClusters)(nil)

// NewExpectedClusters reads the mirrors of install in namespace.
func NewExpectedClusters(client dynamic.Interface, namespace, install string) *ExpectedClusters {
	return &ExpectedClusters{client: client, namespace: namespace, install: install}
}

// ExpectedClusters lists the registered clusters, sorted.
func (e *ExpectedClusters) ExpectedClusters(ctx context.Context) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{labelManagedBy: registrationOwner, labelInstall: e.install}).String()
	list, err := e.client.Resource(KubernetesClusters).Namespace(e.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list KubernetesClusters in %s: %w", e.namespace, err)
	}
	names := []string{}
	for _, it := range list.Items {
		if state, _, _ := unstructured.NestedString(it.Object, "status", "state"); state != stateRegistered {
			continue
		}
		name, _, _ := unstructured.NestedString(it.Object, "spec", "clusterName")
		if name == "" {
			name = it.GetName()
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
