// Package kube is the agent's client-go adapter: informers for discovery
// and a dynamic client for server-side apply.
package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Reader discovers Services through a shared informer.
type Reader struct {
	factory   informers.SharedInformerFactory
	services  listersv1.ServiceLister
	synced    cache.InformerSynced
	changed   chan struct{}
	namespace NamespaceFilter
}

var _ app.ClusterReader = (*Reader)(nil)

// NamespaceFilter scopes discovery. Empty Include means every namespace.
type NamespaceFilter struct {
	Include []string
	Exclude []string
}

func (f NamespaceFilter) allows(ns string) bool {
	if slices.Contains(f.Exclude, ns) {
		return false
	}
	return len(f.Include) == 0 || slices.Contains(f.Include, ns)
}

// NewReader starts informers on client. They run until ctx ends.
func NewReader(ctx context.Context, client kubernetes.Interface, filter NamespaceFilter, resync time.Duration) (*Reader, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		// Keep only what discovery reads: managed fields are often the
		// largest part of an object.
		informers.WithTransform(stripManagedFields))
	svcInformer := factory.Core().V1().Services()
	r := &Reader{
		factory:   factory,
		services:  svcInformer.Lister(),
		synced:    svcInformer.Informer().HasSynced,
		changed:   make(chan struct{}, 1),
		namespace: filter,
	}
	if _, err := svcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.notify() },
		UpdateFunc: func(any, any) { r.notify() },
		DeleteFunc: func(any) { r.notify() },
	}); err != nil {
		return nil, fmt.Errorf("watch services: %w", err)
	}
	factory.Start(ctx.Done())
	return r, nil
}

func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func (r *Reader) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// WaitForSync waits for the informer caches.
func (r *Reader) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), r.synced) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Changed receives after any change to a watched object.
func (r *Reader) Changed() <-chan struct{} { return r.changed }

// Discover lists what the caches hold.
func (r *Reader) Discover() (domain.Discovered, error) {
	svcs, err := r.services.List(labels.Everything())
	if err != nil {
		return domain.Discovered{}, fmt.Errorf("list services: %w", err)
	}
	var d domain.Discovered
	for _, s := range svcs {
		if !r.namespace.allows(s.Namespace) || isSystemService(s) {
			continue
		}
		d.Services = append(d.Services, toService(s))
	}
	slices.SortFunc(d.Services, func(a, b domain.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return d, nil
}

// isSystemService leaves out the API server's own Service.
func isSystemService(s *corev1.Service) bool {
	return s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes"
}

func toService(s *corev1.Service) domain.Service {
	out := domain.Service{
		Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Selector: s.Spec.Selector, Type: string(s.Spec.Type),
	}
	if out.Type == "" {
		out.Type = string(corev1.ServiceTypeClusterIP)
	}
	for _, p := range s.Spec.Ports {
		sp := domain.ServicePort{Name: p.Name, Port: uint32(p.Port), Protocol: string(p.Protocol)}
		if p.AppProtocol != nil {
			sp.AppProtocol = *p.AppProtocol
		}
		if p.TargetPort.StrVal != "" {
			sp.TargetName = p.TargetPort.StrVal
		} else {
			sp.TargetPort = uint32(p.TargetPort.IntVal)
		}
		out.Ports = append(out.Ports, sp)
	}
	return out
}
