// Package kube reads the Meshplane resources applied in the management
// cluster with client-go, and writes translation's statuses back onto them.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/meshcrs"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// crdRecheck is how often resources whose CRD is not served yet are looked
// for again.
const crdRecheck = 30 * time.Second

// Resources watches the Meshplane resources of the management cluster
// through dynamic informers.
type Resources struct {
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
	log  *slog.Logger

	mu      sync.Mutex
	watched []watchedKind
	// warned holds the resources already reported as not decoding, by
	// resourceVersion, so that a bad resource is logged once per change.
	warned map[string]string
}

type watchedKind struct {
	kind   meshcrs.Kind
	lister cache.GenericLister
}

var _ app.ManagementResources = (*Resources)(nil)

// NewResources returns a watcher of the cluster that cfg reaches.
func NewResources(cfg *rest.Config, log *slog.Logger) (*Resources, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("management cluster client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("management cluster discovery client: %w", err)
	}
	return &Resources{dyn: dyn, disc: disc, log: log, warned: map[string]string{}}, nil
}

// Dynamic is the client the watcher reads with; statuses are written with
// it too.
func (r *Resources) Dynamic() dynamic.Interface { return r.dyn }

// Watch starts an informer per Meshplane resource that the cluster serves
// and calls changed once they have synced and after every change. A
// resource whose CRD is missing is looked for again every little while.
func (r *Resources) Watch(ctx context.Context, changed func()) error {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(r.dyn, 0)
	defer factory.Shutdown()
	var synced atomic.Bool
	notify := func() {
		if synced.Load() {
			changed()
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(oldObj, newObj any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	missing := meshcrs.Kinds()
	for {
		var still []meshcrs.Kind
		var added []cache.InformerSynced
		for _, k := range missing {
			served, err := r.served(ctx, k)
			if err != nil {
				r.log.Warn("cannot read a Meshplane resource of the management cluster yet; will look again", "resource", k.GVR.String(), "error", err)
				still = append(still, k)
				continue
			}
			if !served {
				r.log.Warn("the management cluster does not serve a Meshplane resource yet; will look again", "resource", k.GVR.String())
				still = append(still, k)
				continue
			}
			inf := factory.ForResource(k.GVR)
			if _, err := inf.Informer().AddEventHandler(handler); err != nil {
				return fmt.Errorf("watch %s: %w", k.GVR.Resource, err)
			}
			added = append(added, inf.Informer().HasSynced)
			r.mu.Lock()
			r.watched = append(r.watched, watchedKind{kind: k, lister: inf.Lister()})
			r.mu.Unlock()
		}
		missing = still
		factory.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), added...) {
			return nil // ctx ended
		}
		synced.Store(true)
		// Once after the first sync, and whenever a resource joins.
		changed()
		if len(missing) == 0 {
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(crdRecheck):
		}
	}
}

func (r *Resources) served(ctx context.Context, k meshcrs.Kind) (bool, error) {
	list, err := r.disc.ServerResourcesForGroupVersion(k.GVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == k.GVR.Resource }) {
		return false, nil
	}
	// An informer that may not list never syncs, and would hold back the
	// resources it may read: one it may not read waits like a missing CRD.
	if _, err := r.dyn.Resource(k.GVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsForbidden(err) {
			return false, fmt.Errorf("not allowed to list %s (RBAC): %w", k.GVR.Resource, err)
		}
		return false, err
	}
	return true, nil
}

// Snapshot returns what the informers hold. A resource that does not
// decode is left out and logged: translation cannot use it, and the rest
// must not wait for it.
func (r *Resources) Snapshot(cluster string) (*snapshotv1.InputSnapshot, error) {
	r.mu.Lock()
	watched := slices.Clone(r.watched)
	r.mu.Unlock()
	var res meshcrs.Resources
	for _, w := range watched {
		objs, err := w.lister.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", w.kind.GVR.Resource, err)
		}
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if err := w.kind.Decode(&res, u, cluster); err != nil {
				r.warnOnce(w.kind, u, err)
			}
		}
	}
	s := &snapshotv1.InputSnapshot{Cluster: cluster}
	res.AddTo(s)
	return s, nil
}

func (r *Resources) warnOnce(k meshcrs.Kind, u *unstructured.Unstructured, err error) {
	key := k.GVR.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
	r.mu.Lock()
	seen := r.warned[key] == u.GetResourceVersion()
	r.warned[key] = u.GetResourceVersion()
	r.mu.Unlock()
	if !seen {
		r.log.Warn("a Meshplane resource of the management cluster does not decode; it is sent with its decode error and reported INVALID",
			"resource", k.GVR.GroupResource().String(), "namespace", u.GetNamespace(), "name", u.GetName(), "error", err)
	}
}
