package istioloop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The package's tests share one API server, one test at a time: starting
// one takes about 8 s and istiod about 2 s, and a test is about one
// golden case. Each test leases it, and its objects are deleted when the
// test ends; istiod is started anew for each.
var shared struct {
	mu      sync.Mutex // guards cluster
	cluster *kubetest.Cluster
	lease   sync.Mutex
}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// leaseKube returns the package's API server, starting it on first use,
// for t alone until t ends; then every object a test makes is deleted
// (a cluster that cannot be cleaned is stopped, and the next test starts
// a fresh one).
func leaseKube(t *testing.T) *kubetest.Cluster {
	t.Helper()
	if !shared.lease.TryLock() {
		t.Fatal("istioloop: the API server is leased to another test: start one mesh per (sub)test, and no parallel tests")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		c, err := kubetest.StartCluster(context.Background(), kubetest.Options{Name: "istioloop", SkipMeshplaneCRDs: true})
		if err != nil {
			shared.lease.Unlock()
			t.Fatal(err)
		}
		shared.cluster = c
	}
	c := shared.cluster
	t.Cleanup(func() {
		defer shared.lease.Unlock()
		if t.Failed() {
			etcd, apiserver := c.LogFiles()
			t.Logf("kube-apiserver log %s, etcd log %s", apiserver, etcd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := clean(ctx, c); err != nil {
			t.Errorf("istioloop: cleaning the shared API server (stopped; the next test starts another): %v", err)
			shared.mu.Lock()
			c.Stop()
			shared.cluster = nil
			shared.mu.Unlock()
		}
	})
	return c
}

// clean deletes what the tests make: every Istio object, pod, service
// account, and service and endpoint slice but the API server's own
// (default/kubernetes). Namespaces stay: without a namespace controller
// they would never go.
func clean(ctx context.Context, c *kubetest.Cluster) error {
	resources := []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"},
		{Version: "v1", Resource: "services"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	}
	lists, err := c.Clientset().Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		return fmt.Errorf("discover the Istio resources: %w", err)
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || !strings.HasSuffix(gv.Group, "istio.io") {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				resources = append(resources, gv.WithResource(r.Name))
			}
		}
	}
	zero := int64(0)
	var errs []error
	for _, gvr := range resources {
		objs, err := c.Dynamic().Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", gvr.Resource, err))
			continue
		}
		for _, o := range objs.Items {
			if o.GetNamespace() == metav1.NamespaceDefault && o.GetName() == "kubernetes" {
				continue
			}
			// Grace period 0: no kubelet confirms a pod's end.
			err := c.Dynamic().Resource(gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil {
				errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, o.GetNamespace(), o.GetName(), err))
			}
		}
	}
	return errors.Join(errs...)
}
