// Package kube is the agent's client-go adapter: informers for discovery
// and a dynamic client for server-side apply.
package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshplane/meshplane/services/agent/discovery"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	discolisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Clients are the API clients discovery needs.
type Clients struct {
	Kube     kubernetes.Interface
	Metadata metadata.Interface
	Dynamic  dynamic.Interface
}

// NewClients builds the clients from a REST config.
func NewClients(cfg *rest.Config) (Clients, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kc, Metadata: mc, Dynamic: dc}, nil
}

// NamespaceFilter scopes discovery. Empty Include means every namespace;
// Exclude wins over Include; Selector, a label selector, must also match
// the namespace's labels when set.
type NamespaceFilter struct {
	Include  []string
	Exclude  []string
	Selector string
}

func (f NamespaceFilter) allows(ns string, nsLabels map[string]string, sel labels.Selector) bool {
	if slices.Contains(f.Exclude, ns) {
		return false
	}
	if len(f.Include) > 0 && !slices.Contains(f.Include, ns) {
		return false
	}
	return sel == nil || sel.Matches(labels.Set(nsLabels))
}

// Options configure a Reader.
type Options struct {
	// Cluster is set on the metadata of user resources.
	Cluster    string
	Namespaces NamespaceFilter
	Discovery  domain.Options
	Resync     time.Duration
	Log        *slog.Logger
	// CRDPollInterval is how often the CRDs of Meshplane resources that
	// the cluster did not serve at start are looked for; default 30s.
	CRDPollInterval time.Duration
}

var (
	replicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// Reader discovers the cluster through shared informers whose caches hold
// only what discovery reads.
type Reader struct {
	opts     Options
	log      *slog.Logger
	selector labels.Selector

	services       listersv1.ServiceLister
	pods           cache.Indexer // of *cachedPod
	configMaps     listersv1.ConfigMapLister
	nodes          listersv1.NodeLister
	deployments    appslisters.DeploymentLister
	endpointSlices discolisters.EndpointSliceLister
	replicaSets    cache.GenericLister
	namespaces     cache.GenericLister
	dyn            dynamicinformer.DynamicSharedInformerFactory
	handler        cache.ResourceEventHandler

	synced  []cache.InformerSynced
	changed chan struct{}

	mu        sync.Mutex
	resources []resourceInformer
	warned    map[string]string // resource key -> resourceVersion already warned about

	istio []istioInformer // guarded by mu
}

type resourceInformer struct {
	userResource
	lister cache.GenericLister
}

var _ app.ClusterReader = (*Reader)(nil)

// NewReader starts informers. They run until ctx ends.
func NewReader(ctx context.Context, c Clients, opts Options) (*Reader, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r := &Reader{opts: opts, log: opts.Log, changed: make(chan struct{}, 1), warned: map[string]string{}}
	if s := strings.TrimSpace(opts.Namespaces.Selector); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("namespace selector %q: %w", s, err)
		}
		r.selector = sel
	}
	r.handler = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.notify() },
		UpdateFunc: func(any, any) { r.notify() },
		DeleteFunc: func(any) { r.notify() },
	}
	watch := func(inf cache.SharedIndexInformer, what string) error {
		if _, err := inf.AddEventHandler(r.handler); err != nil {
			return fmt.Errorf("watch %s: %w", what, err)
		}
		r.synced = append(r.synced, inf.HasSynced)
		return nil
	}

	typed := informers.NewSharedInformerFactoryWithOptions(c.Kube, opts.Resync, informers.WithTransform(transform))
	svc, pod, cm, node := typed.Core().V1().Services(), typed.Core().V1().Pods(), typed.Core().V1().ConfigMaps(), typed.Core().V1().Nodes()
	dep, eps := typed.Apps().V1().Deployments(), typed.Discovery().V1().EndpointSlices()
	r.services, r.pods, r.configMaps, r.nodes = svc.Lister(), pod.Informer().GetIndexer(), cm.Lister(), node.Lister()
	r.deployments, r.endpointSlices = dep.Lister(), eps.Lister()
	for what, inf := range map[string]cache.SharedIndexInformer{
		"services": svc.Informer(), "pods": pod.Informer(), "configmaps": cm.Informer(), "nodes": node.Informer(),
		"deployments": dep.Informer(), "endpointslices": eps.Informer(),
	} {
		if err := watch(inf, what); err != nil {
			return nil, err
		}
	}

	// Only the ownership of ReplicaSets and the labels of namespaces are
	// read: metadata-only informers.
	meta := metadatainformer.NewSharedInformerFactoryWithOptions(c.Metadata, opts.Resync, metadatainformer.WithTransform(transform))
	rs, ns := meta.ForResource(replicaSets), meta.ForResource(namespaces)
	r.replicaSets, r.namespaces = rs.Lister(), ns.Lister()
	if err := watch(rs.Informer(), "replicasets"); err != nil {
		return nil, err
	}
	if err := watch(ns.Informer(), "namespaces"); err != nil {
		return nil, err
	}

	r.dyn = dynamicinformer.NewDynamicSharedInformerFactory(c.Dynamic, opts.Resync)
	var missing []userResource
	for _, ur := range userResources {
		served, err := isServed(c.Kube, ur.gvr)
		if err != nil {
			return nil, err
		}
		if !served {
			// An informer on a missing resource never syncs, and the agent
			// would never push: it is watched once its CRD appears.
			r.log.Warn("Meshplane resource is not served by this cluster yet; watching for its CRD", "resource", ur.gvr.String())
			missing = append(missing, ur)
			continue
		}
		inf, err := r.resourceInformer(ur)
		if err != nil {
			return nil, err
		}
		r.synced = append(r.synced, inf.Informer().HasSynced)
		r.resources = append(r.resources, resourceInformer{userResource: ur, lister: inf.Lister()})
	}

	if err := r.watchIstio(ctx, c.Kube); err != nil {
		return nil, err
	}

	typed.Start(ctx.Done())
	meta.Start(ctx.Done())
	r.dyn.Start(ctx.Done())
	if len(missing) > 0 {
		go r.watchForCRDs(ctx, c.Kube, missing)
	}
	return r, nil
}

func (r *Reader) resourceInformer(ur userResource) (informers.GenericInformer, error) {
	gi := r.dyn.ForResource(ur.gvr)
	if err := gi.Informer().SetTransform(transform); err != nil {
		return nil, fmt.Errorf("transform %s: %w", ur.gvr, err)
	}
	if _, err := gi.Informer().AddEventHandler(r.handler); err != nil {
		return nil, fmt.Errorf("watch %s: %w", ur.gvr, err)
	}
	return gi, nil
}

// watchForCRDs starts the informers of user resources whose CRDs were
// missing at start, as each appears.
func (r *Reader) watchForCRDs(ctx context.Context, kc kubernetes.Interface, missing []userResource) {
	interval := cmp.Or(r.opts.CRDPollInterval, 30*time.Second)
	t := time.NewTicker(interval)
	defer t.Stop()
	for len(missing) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var still []userResource
		for _, ur := range missing {
			served, err := isServed(kc, ur.gvr)
			if err != nil || !served {
				still = append(still, ur)
				continue
			}
			inf, err := r.resourceInformer(ur)
			if err != nil {
				r.log.Error("cannot watch a Meshplane resource", "resource", ur.gvr.String(), "error", err)
				continue
			}
			r.dyn.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
				return
			}
			r.mu.Lock()
			r.resources = append(r.resources, resourceInformer{userResource: ur, lister: inf.Lister()})
			r.mu.Unlock()
			r.log.Info("watching a Meshplane resource whose CRD appeared", "resource", ur.gvr.String())
			r.notify()
		}
		missing = still
	}
}

func isServed(kc kubernetes.Interface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := kc.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gvr.GroupVersion(), err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }), nil
}

func (r *Reader) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// WaitForSync waits for the informer caches.
func (r *Reader) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), r.synced...) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Changed receives after any change to a watched object.
func (r *Reader) Changed() <-chan struct{} { return r.changed }

// Discover converts what the caches hold. It never fails on one bad object:
// a user resource that does not decode goes into the snapshot with its
// decode error (translation reports it INVALID), and a warning is logged.
func (r *Reader) Discover() (domain.Discovered, error) {
	d := domain.Discovered{Options: r.opts.Discovery}
	var errs []error
	listErr := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", what, err))
		}
	}

	nsObjs, err := r.namespaces.List(labels.Everything())
	listErr("namespaces", err)
	nsLabels := make(map[string]map[string]string, len(nsObjs))
	for _, o := range nsObjs {
		if m, ok := o.(metav1.Object); ok {
			nsLabels[m.GetName()] = m.GetLabels()
			d.Namespaces = append(d.Namespaces, domain.Namespace{Name: m.GetName(), Labels: m.GetLabels()})
		}
	}
	filtering := len(r.opts.Namespaces.Include) > 0 || len(r.opts.Namespaces.Exclude) > 0 || r.selector != nil
	if filtering {
		d.InScope = map[string]bool{}
	}
	scope := func(ns string) {
		if filtering {
			if _, done := d.InScope[ns]; !done {
				d.InScope[ns] = r.opts.Namespaces.allows(ns, nsLabels[ns], r.selector)
			}
		}
	}
	for ns := range nsLabels {
		scope(ns)
	}

	svcs, err := r.services.List(labels.Everything())
	listErr("services", err)
	for _, s := range svcs {
		if discovery.IsSystemService(s) {
			continue
		}
		scope(s.Namespace)
		d.Services = append(d.Services, discovery.Service(s))
	}
	pods := r.pods.List()
	d.Pods = make([]domain.Pod, 0, len(pods))
	for _, o := range pods {
		p, ok := o.(*cachedPod)
		if !ok {
			continue
		}
		if p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed {
			continue
		}
		scope(p.Namespace)
		d.Pods = append(d.Pods, toPod(p))
	}
	rsObjs, err := r.replicaSets.List(labels.Everything())
	listErr("replicasets", err)
	for _, o := range rsObjs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			d.ReplicaSets = append(d.ReplicaSets, domain.ReplicaSet{Name: m.Name, Namespace: m.Namespace, Controller: discovery.ControllerOf(&m.ObjectMeta)})
		}
	}
	deps, err := r.deployments.List(labels.Everything())
	listErr("deployments", err)
	for _, dep := range deps {
		if discovery.MayBeIstiod(dep) {
			d.Deployments = append(d.Deployments, discovery.Deployment(dep))
		}
	}
	cms, err := r.configMaps.List(labels.Everything())
	listErr("configmaps", err)
	for _, cm := range cms {
		if _, ok := cm.Data["mesh"]; !ok || !discovery.IsMeshConfig(cm.Name) {
			continue
		}
		mc, err := discovery.MeshConfig(cm)
		if err != nil {
			r.warnOnce("configmap/"+cm.Namespace+"/"+cm.Name, cm.ResourceVersion, "mesh config does not parse; using defaults",
				"configmap", cm.Namespace+"/"+cm.Name, "error", err)
		}
		d.MeshConfigs = append(d.MeshConfigs, mc)
	}
	nodes, err := r.nodes.List(labels.Everything())
	listErr("nodes", err)
	for _, n := range nodes {
		d.Nodes = append(d.Nodes, discovery.Node(n))
	}
	esl, err := r.endpointSlices.List(labels.Everything())
	listErr("endpointslices", err)
	for _, es := range esl {
		scope(es.Namespace)
		d.EndpointSlices = append(d.EndpointSlices, discovery.EndpointSlice(es))
	}
	r.mu.Lock()
	resources := slices.Clone(r.resources)
	r.mu.Unlock()
	for _, ri := range resources {
		objs, err := ri.lister.List(labels.Everything())
		listErr(ri.gvr.Resource, err)
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			scope(u.GetNamespace())
			if err := decodeUserResource(&d.Resources, ri.userResource, u, r.opts.Cluster); err != nil {
				r.warnOnce(ri.gvr.Resource+"/"+u.GetNamespace()+"/"+u.GetName(), u.GetResourceVersion(),
					"a Meshplane resource does not decode; it is sent with its decode error and reported INVALID",
					"resource", ri.gvr.GroupResource().String(), "namespace", u.GetNamespace(), "name", u.GetName(), "error", err)
			}
		}
	}
	d.IstioObjects, err = r.discoverIstio()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return domain.Discovered{}, errors.Join(errs...)
	}
	return d, nil
}

// warnOnce logs a problem with an object once per resource version, not on
// every snapshot.
func (r *Reader) warnOnce(key, resourceVersion, msg string, args ...any) {
	r.mu.Lock()
	seen := r.warned[key] == resourceVersion
	r.warned[key] = resourceVersion
	r.mu.Unlock()
	if !seen {
		r.log.Warn(msg, args...)
	}
}
