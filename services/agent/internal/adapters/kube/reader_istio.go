package kube

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/meshplane/meshplane/services/agent/discovery"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// istioKinds are the Istio objects read for conflict detection: a user's
// VirtualService or DestinationRule for a host Meshplane also configures.
var istioKinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{domain.KindVirtualService, schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}},
	{domain.KindDestinationRule, schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}},
}

type istioInformer struct {
	kind   string
	lister cache.GenericLister
}

// watchIstio starts informers on the Istio kinds the cluster serves. Their
// caches hold only names, the managed-by label, hosts and exportTo (see
// slimIstioObject). A cluster without Istio's CRDs has no user objects;
// the kinds it does not serve yet are watched for, as the Meshplane CRDs
// are, and picked up when they appear.
func (r *Reader) watchIstio(ctx context.Context, kc kubernetes.Interface) error {
	var missing []int
	for i, k := range istioKinds {
		served, err := isServed(kc, k.gvr)
		if err != nil {
			return err
		}
		if !served {
			r.log.Info("Istio resource is not served by this cluster yet; watching for its CRD", "resource", k.gvr.String())
			missing = append(missing, i)
			continue
		}
		gi, err := r.istioInformer(i)
		if err != nil {
			return err
		}
		r.synced = append(r.synced, gi.Informer().HasSynced)
		r.istio = append(r.istio, istioInformer{kind: k.kind, lister: gi.Lister()})
	}
	if len(missing) > 0 {
		go r.watchForIstioCRDs(ctx, kc, missing)
	}
	return nil
}

func (r *Reader) istioInformer(i int) (informers.GenericInformer, error) {
	k := istioKinds[i]
	gi := r.dyn.ForResource(k.gvr)
	if err := gi.Informer().SetTransform(transformIstio); err != nil {
		return nil, fmt.Errorf("transform %s: %w", k.gvr, err)
	}
	if _, err := gi.Informer().AddEventHandler(r.handler); err != nil {
		return nil, fmt.Errorf("watch %s: %w", k.gvr, err)
	}
	return gi, nil
}

// watchForIstioCRDs starts the informers of the Istio kinds whose CRDs
// were missing at start, as each appears.
func (r *Reader) watchForIstioCRDs(ctx context.Context, kc kubernetes.Interface, missing []int) {
	t := time.NewTicker(cmp.Or(r.opts.CRDPollInterval, 30*time.Second))
	defer t.Stop()
	for len(missing) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var still []int
		for _, i := range missing {
			if served, err := isServed(kc, istioKinds[i].gvr); err != nil || !served {
				still = append(still, i)
				continue
			}
			gi, err := r.istioInformer(i)
			if err != nil {
				r.log.Error("cannot watch an Istio resource", "resource", istioKinds[i].gvr.String(), "error", err)
				continue
			}
			r.dyn.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), gi.Informer().HasSynced) {
				return
			}
			r.mu.Lock()
			r.istio = append(r.istio, istioInformer{kind: istioKinds[i].kind, lister: gi.Lister()})
			r.mu.Unlock()
			r.log.Info("watching an Istio resource whose CRD appeared", "resource", istioKinds[i].gvr.String())
			r.notify()
		}
		missing = still
	}
}

// discoverIstio lists the cached Istio objects.
func (r *Reader) discoverIstio() ([]domain.IstioObject, error) {
	r.mu.Lock()
	infs := slices.Clone(r.istio)
	r.mu.Unlock()
	var out []domain.IstioObject
	for _, inf := range infs {
		objs, err := inf.lister.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", inf.kind, err)
		}
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			out = append(out, discovery.IstioObject(inf.kind, u))
		}
	}
	return out, nil
}
