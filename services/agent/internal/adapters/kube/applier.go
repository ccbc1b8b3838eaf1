package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"unique"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// outputKind is a kind that translation writes.
type outputKind struct {
	gvr  schema.GroupVersionResource
	kind string
}

// outputKinds are the kinds that translation writes, and so the kinds that
// the applier watches.
var outputKinds = []outputKind{
	{schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}, "DestinationRule"},
	{schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}, "VirtualService"},
	{schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}, "ServiceEntry"},
	{schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "gateways"}, "Gateway"},
	{schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}, "AuthorizationPolicy"},
	{schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "peerauthentications"}, "PeerAuthentication"},
	{schema.GroupVersionResource{Group: "extensions.istio.io", Version: "v1alpha1", Resource: "wasmplugins"}, "WasmPlugin"},
}

// Applier applies output objects with server-side apply, and watches the
// objects of the output kinds through a metadata-only informer: every
// object of those kinds, not only Meshplane's, so that a user's object of
// the same name is found without a read.
type Applier struct {
	md      metadata.Interface
	mapper  meta.RESTMapper
	install string
	cluster string

	// stores holds one informer store per watched group and kind; Sync
	// sets it once.
	stores map[schema.GroupKind]cache.Store

	// labels shares the label maps of the objects the view holds.
	labels snapshots.LabelSets

	mu sync.Mutex
	// pending holds the objects changed since TakeChanges, as the view
	// holds them: during a first apply every object is one.
	pending map[domain.ObjectID]pendingChange
	changed chan struct{}
}

// pendingChange is a change of the view's object m, of kind outputKinds[k].
type pendingChange struct {
	k    int
	m    *metav1.ObjectMeta
	gone bool
}

var (
	_ app.Applier        = (*Applier)(nil)
	_ app.ClusterObjects = (*Applier)(nil)
)

// NewApplier returns an applier for this install and cluster.
func NewApplier(md metadata.Interface, mapper meta.RESTMapper, install, cluster string) *Applier {
	return &Applier{
		md: md, mapper: mapper, install: install, cluster: cluster,
		pending: map[domain.ObjectID]pendingChange{}, changed: make(chan struct{}, 1),
	}
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
			if r, ok := mapper.(meta.ResettableRESTMapper); ok {
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

// Sync starts the metadata informers of the output kinds that the cluster
// serves and waits until they have listed. A kind whose CRD is missing is
// not watched: its objects are applied without a cached view.
func (a *Applier) Sync(ctx context.Context) error {
	if a.stores != nil {
		return nil // started already, and synced
	}
	factory := metadatainformer.NewSharedInformerFactoryWithOptions(a.md, 0, metadatainformer.WithTransform(a.slimOutputMeta))
	stores := map[schema.GroupKind]cache.Store{}
	var synced []cache.InformerSynced
	for i, k := range outputKinds {
		if _, err := a.mapper.RESTMapping(k.gvr.GroupVersion().WithKind(k.kind).GroupKind(), k.gvr.Version); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("map %s: %w", k.gvr.Resource, err)
		}
		inf := factory.ForResource(k.gvr).Informer()
		if _, err := inf.AddEventHandler(a.handler(i)); err != nil {
			return err
		}
		stores[k.gvr.GroupVersion().WithKind(k.kind).GroupKind()] = inf.GetStore()
		synced = append(synced, inf.HasSynced)
	}
	a.stores = stores
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("sync the output kinds' metadata: %w", context.Cause(ctx))
	}
	return nil
}

// slimOutputMeta keeps what the applier reads of an object (live), in an
// object of its own, so that what the API server sent is not kept: the
// identity, generation and labels, and for an owned object its
// annotations and its managed fields' managers and times, an entry's
// field set only as whether it owns fields of the spec. Equal label sets
// share one map (the objects Meshplane applies carry one), annotation
// values are canonical strings, shared with the output, and a user's
// object keeps no annotations, which nothing reads (kubectl's
// last-applied-configuration alone is the size of the object). It may run
// again on what it returned.
func (a *Applier) slimOutputMeta(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		Labels: a.labels.Share(m.Labels),
	}}
	if !a.owns(m.Labels) {
		return out, nil
	}
	// The values (but the digest, which no other copy holds) shared with
	// the output as received (snapshots.LabelSets.ShareObjects).
	snapshots.CanonicalValues(m.Annotations, snapshots.AnnotationDigest)
	out.Annotations = m.Annotations
	for _, e := range m.ManagedFields {
		if e.Subresource != "" {
			continue // istiod's status writes
		}
		kept := metav1.ManagedFieldsEntry{Manager: unique.Make(e.Manager).Value(), Operation: e.Operation, Time: e.Time}
		if e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.GetRawBytes(), []byte(`"f:spec"`)) {
			kept.FieldsV1 = metav1.NewFieldsV1(specFieldsString)
		}
		out.ManagedFields = append(out.ManagedFields, kept)
	}
	return out, nil
}

// specFieldsString marks a managed fields entry that owns fields of the
// spec.
const specFieldsString = `{"f:spec":{}}`

func (a *Applier) handler(i int) cache.ResourceEventHandler {
	k := outputKinds[i]
	note := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		id := domain.ObjectID{Group: k.gvr.Group, Kind: k.kind, Namespace: m.Namespace, Name: m.Name}
		a.mu.Lock()
		a.pending[id] = pendingChange{k: i, m: &m.ObjectMeta, gone: gone}
		a.mu.Unlock()
		select {
		case a.changed <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note(obj, false) },
		UpdateFunc: func(_, obj any) { note(obj, false) },
		DeleteFunc: func(obj any) { note(obj, true) },
	}
}

func (a *Applier) owns(l map[string]string) bool {
	return l[snapshots.LabelManagedBy] == a.install && l[snapshots.LabelCluster] == a.cluster
}

// live reads an object's metadata.
func (a *Applier) live(k outputKind, m *metav1.ObjectMeta) domain.LiveObject {
	l := domain.LiveObject{
		Key:        domain.ObjectKey{APIVersion: k.gvr.GroupVersion().String(), Kind: k.kind, Namespace: m.Namespace, Name: m.Name},
		UID:        string(m.UID),
		Generation: m.Generation, ResourceVersion: m.ResourceVersion,
		Owned:  a.owns(m.Labels),
		Labels: m.Labels, Annotations: m.Annotations,
	}
	for _, e := range m.ManagedFields {
		if e.Subresource != "" || e.Time == nil {
			continue
		}
		if e.Manager == snapshots.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply {
			l.Applied = e.Time.Time
			continue
		}
		if e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.GetRawBytes(), []byte(`"f:spec"`)) && !e.Time.Time.Before(l.SpecWritten) {
			l.SpecWriter, l.SpecWritten = e.Manager+" ("+string(e.Operation)+")", e.Time.Time
		}
	}
	return l
}

// Get implements app.ClusterObjects.
func (a *Applier) Get(key domain.ObjectKey) (domain.LiveObject, bool) {
	gv, err := schema.ParseGroupVersion(key.APIVersion)
	if err != nil {
		return domain.LiveObject{}, false
	}
	store, ok := a.stores[gv.WithKind(key.Kind).GroupKind()]
	if !ok {
		return domain.LiveObject{}, false
	}
	obj, ok, err := store.GetByKey(key.Namespace + "/" + key.Name)
	if err != nil || !ok {
		return domain.LiveObject{}, false
	}
	m := obj.(*metav1.PartialObjectMetadata)
	return a.live(a.kindOf(gv.Group, key.Kind), &m.ObjectMeta), true
}

func (a *Applier) kindOf(group, kind string) outputKind {
	for _, k := range outputKinds {
		if k.gvr.Group == group && k.kind == kind {
			return k
		}
	}
	return outputKind{}
}

// Owned implements app.ClusterObjects.
func (a *Applier) Owned() []domain.LiveObject {
	var out []domain.LiveObject
	for _, k := range outputKinds {
		store, ok := a.stores[k.gvr.GroupVersion().WithKind(k.kind).GroupKind()]
		if !ok {
			continue
		}
		for _, obj := range store.List() {
			m := obj.(*metav1.PartialObjectMetadata)
			if a.owns(m.Labels) {
				out = append(out, a.live(k, &m.ObjectMeta))
			}
		}
	}
	return out
}

// Changed implements app.ClusterObjects.
func (a *Applier) Changed() <-chan struct{} { return a.changed }

// TakeChanges implements app.ClusterObjects.
func (a *Applier) TakeChanges() []app.ObjectChange {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]app.ObjectChange, 0, len(a.pending))
	for _, c := range a.pending {
		out = append(out, app.ObjectChange{Object: a.live(outputKinds[c.k], c.m), Gone: c.gone})
	}
	// A new map: clear keeps the storage of the largest batch, a whole
	// output's after a first apply.
	a.pending = map[domain.ObjectID]pendingChange{}
	return out
}

// applyBody is the server-side apply configuration of an object. The spec
// goes as translation encoded it.
type applyBody struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   applyMeta       `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
}

type applyMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	UID         types.UID         `json:"uid,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations"`
}

// Apply implements app.Applier. It reads nothing first: the view says
// whose an object of that name is. The API server settles a view that is
// behind. An owned object is applied with its UID, a precondition: one
// deleted or replaced since the view saw it fails and is read again. An
// object the view does not hold is applied without force: a user's
// object that appeared meanwhile conflicts on every field whose value
// differs, and is read again.
func (a *Applier) Apply(ctx context.Context, d domain.DesiredObject, live *domain.LiveObject) (domain.LiveObject, error) {
	o := d.Object
	if live != nil && !live.Owned {
		return domain.LiveObject{}, a.conflict(d.Key)
	}
	if len(o.GetSpec()) > 0 && !json.Valid(o.GetSpec()) {
		return domain.LiveObject{}, fmt.Errorf("decode spec: not JSON")
	}
	gvr, err := a.resource(o.GetApiVersion(), o.GetKind())
	if err != nil {
		return domain.LiveObject{}, err
	}
	// The metadata client: the API server answers with the object's
	// metadata only, which is all the applier keeps, rather than the whole
	// object for the agent to decode and drop.
	client := a.md.Resource(gvr).Namespace(o.GetNamespace())
	annotations := make(map[string]string, len(o.GetAnnotations())+1)
	maps.Copy(annotations, o.GetAnnotations())
	annotations[snapshots.AnnotationDigest] = d.Digest
	body := applyBody{
		APIVersion: o.GetApiVersion(), Kind: o.GetKind(),
		Metadata: applyMeta{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels(), Annotations: annotations},
		Spec:     o.GetSpec(),
	}
	force := false
	if live != nil {
		body.Metadata.UID, force = types.UID(live.UID), true
	}
	got, err := a.patch(ctx, client, body, force)
	if apierrors.IsConflict(err) {
		got, err = a.settle(ctx, client, d.Key, body)
	}
	if err != nil {
		return domain.LiveObject{}, err
	}
	return a.live(a.kindOf(gvr.Group, o.GetKind()), got), nil
}

func (a *Applier) patch(ctx context.Context, client metadata.ResourceInterface, body applyBody, force bool) (*metav1.ObjectMeta, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	got, err := client.Patch(ctx, body.Metadata.Name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: snapshots.FieldManager, Force: &force})
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	return &got.ObjectMeta, nil
}

// settle reads an object whose apply conflicted, and applies it again when
// it is Meshplane's.
func (a *Applier) settle(ctx context.Context, client metadata.ResourceInterface, key domain.ObjectKey, body applyBody) (*metav1.ObjectMeta, error) {
	existing, err := client.Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		body.Metadata.UID = ""
		return a.patch(ctx, client, body, false)
	case err != nil:
		return nil, fmt.Errorf("read existing object: %w", err)
	case !a.owns(existing.GetLabels()):
		return nil, a.conflict(key)
	}
	body.Metadata.UID = existing.GetUID()
	return a.patch(ctx, client, body, true)
}

func (a *Applier) conflict(key domain.ObjectKey) error {
	return fmt.Errorf("%w: %s %s/%s has no %s=%s, %s=%s labels", app.ErrConflict, key.Kind, key.Namespace, key.Name,
		snapshots.LabelManagedBy, a.install, snapshots.LabelCluster, a.cluster)
}

// Delete implements app.Applier: an owned object, only while it is the
// object live describes. One already gone is not an error.
func (a *Applier) Delete(ctx context.Context, live domain.LiveObject) error {
	if !live.Owned {
		return fmt.Errorf("refusing to delete %s: %w", live.Key, app.ErrConflict)
	}
	gvr, err := a.resource(live.Key.APIVersion, live.Key.Kind)
	if err != nil {
		return err
	}
	client := a.md.Resource(gvr).Namespace(live.Key.Namespace)
	for attempt := 0; ; attempt++ {
		pre := &metav1.Preconditions{}
		if live.UID != "" {
			uid := types.UID(live.UID)
			pre.UID = &uid
		}
		if live.ResourceVersion != "" {
			rv := live.ResourceVersion
			pre.ResourceVersion = &rv
		}
		err = client.Delete(ctx, live.Key.Name, metav1.DeleteOptions{Preconditions: pre})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return err
		}
		// Changed since the view saw it: read it, and delete it only if
		// it is still Meshplane's.
		existing, err := client.Get(ctx, live.Key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", live.Key, err)
		}
		if !a.owns(existing.GetLabels()) {
			return fmt.Errorf("refusing to delete %s: %w", live.Key, app.ErrConflict)
		}
		live.UID, live.ResourceVersion = string(existing.GetUID()), existing.GetResourceVersion()
	}
}
