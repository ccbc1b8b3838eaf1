package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// OutputKinds are the kinds that translation writes, and so the kinds that
// garbage collection looks at.
var OutputKinds = []schema.GroupVersionResource{
	{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"},
	{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"},
	{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"},
	{Group: "networking.istio.io", Version: "v1", Resource: "gateways"},
	{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"},
	{Group: "security.istio.io", Version: "v1", Resource: "peerauthentications"},
	{Group: "extensions.istio.io", Version: "v1alpha1", Resource: "wasmplugins"},
}

// Applier applies output objects with server-side apply.
type Applier struct {
	dyn     dynamic.Interface
	mapper  meta.RESTMapper
	install string
	cluster string
}

var _ app.Applier = (*Applier)(nil)

// NewApplier returns an applier for this install and cluster.
func NewApplier(dyn dynamic.Interface, mapper meta.RESTMapper, install, cluster string) *Applier {
	return &Applier{dyn: dyn, mapper: mapper, install: install, cluster: cluster}
}

func (a *Applier) resource(apiVersion, kind string) (schema.GroupVersionResource, error) {
	return mapResource(a.mapper, apiVersion, kind)
}

// mapResource finds the resource of a kind, refreshing a resettable mapper
// once when the kind is unknown: its CRD may have been installed since.
func mapResource(mapper meta.RESTMapper, apiVersion, kind string) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("bad apiVersion %q: %w", apiVersion, err)
	}
	m, err := mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			if r, ok := mapper.(interface{ Reset() }); ok {
				r.Reset()
				m, err = mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
			}
		}
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("map %s %s: %w", apiVersion, kind, err)
		}
	}
	return m.Resource, nil
}

// Apply server-side applies obj, after checking that an existing object of
// the same name is Meshplane's.
func (a *Applier) Apply(ctx context.Context, obj *snapshotv1.Object) error {
	gvr, err := a.resource(obj.GetApiVersion(), obj.GetKind())
	if err != nil {
		return err
	}
	client := a.dyn.Resource(gvr).Namespace(obj.GetNamespace())
	existing, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read existing object: %w", err)
	case !a.owns(existing.GetLabels()):
		return fmt.Errorf("%w: %s %s/%s has no %s=%s label", app.ErrConflict, obj.GetKind(), obj.GetNamespace(), obj.GetName(), snapshots.LabelManagedBy, a.install)
	}

	var spec map[string]any
	if len(obj.GetSpec()) > 0 {
		if err := json.Unmarshal(obj.GetSpec(), &spec); err != nil {
			return fmt.Errorf("decode spec: %w", err)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetApiVersion(),
		"kind":       obj.GetKind(),
		"spec":       spec,
	}}
	u.SetName(obj.GetName())
	u.SetNamespace(obj.GetNamespace())
	// The ownership labels are enforced here whatever translation sent:
	// garbage collection trusts them.
	lbls := maps.Clone(obj.GetLabels())
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[snapshots.LabelManagedBy] = a.install
	lbls[snapshots.LabelCluster] = a.cluster
	u.SetLabels(lbls)
	if len(obj.GetAnnotations()) > 0 {
		u.SetAnnotations(obj.GetAnnotations())
	}
	_, err = client.Apply(ctx, obj.GetName(), u, metav1.ApplyOptions{FieldManager: snapshots.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return nil
}

func (a *Applier) owns(l map[string]string) bool {
	return l[snapshots.LabelManagedBy] == a.install && l[snapshots.LabelCluster] == a.cluster
}

func (a *Applier) selector() string {
	return fmt.Sprintf("%s=%s,%s=%s", snapshots.LabelManagedBy, a.install, snapshots.LabelCluster, a.cluster)
}

// ListOwned lists every output-kind object that carries this install's and
// cluster's labels. A kind whose CRD is not installed is skipped.
func (a *Applier) ListOwned(ctx context.Context) ([]domain.ObjectKey, error) {
	var out []domain.ObjectKey
	for _, gvr := range OutputKinds {
		list, err := a.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: a.selector()})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, item := range list.Items {
			if !a.owns(item.GetLabels()) {
				continue
			}
			out = append(out, domain.ObjectKey{APIVersion: item.GetAPIVersion(), Kind: item.GetKind(), Namespace: item.GetNamespace(), Name: item.GetName()})
		}
	}
	return out, nil
}

// Delete deletes an owned object; one already gone is not an error.
func (a *Applier) Delete(ctx context.Context, key domain.ObjectKey) error {
	gvr, err := a.resource(key.APIVersion, key.Kind)
	if err != nil {
		return err
	}
	client := a.dyn.Resource(gvr).Namespace(key.Namespace)
	existing, err := client.Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if !a.owns(existing.GetLabels()) {
		return fmt.Errorf("refusing to delete %s: %w", key, app.ErrConflict)
	}
	// Preconditions make sure we delete the object we checked.
	uid := existing.GetUID()
	err = client.Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
