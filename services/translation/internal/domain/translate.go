// Package domain is the translation model and rules: a pure function from
// every cluster's input snapshot to every cluster's output snapshot. It knows
// nothing of RPC, Redis or Kubernetes clients; the snapshot and Istio messages
// are its data model.
package domain

import (
	"fmt"
	"slices"
	"strings"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/proto"
)

// Options are the install-wide settings translation needs.
type Options struct {
	// Install is the value of the managed-by label.
	Install string
	// ClusterDomain is the DNS suffix of Services, usually cluster.local.
	ClusterDomain string
	// ManagementCluster names the management cluster's input, whose
	// Settings are read; the install name when empty (the management
	// cluster is named by the install).
	ManagementCluster string
	// Namespace is the install's namespace, where the Settings named
	// "settings" is read; any namespace when empty.
	Namespace string

	// labels holds the label map of each cluster's objects, which they
	// share; set by withDefaults.
	labels *labelMaps
	// sealed is Incremental.OnSealed's function.
	sealed func(*snapshotv1.OutputSnapshot)
	// enc encodes every spec and status; tests set it to check the
	// encodings against protojson (WithVerifiedEncoding).
	enc encode.Encoder
}

// labelMaps gives the objects of one cluster one label map, instead of
// one each: outputs hold up to millions of objects. Nothing modifies an
// object's labels once it is made. Not safe for concurrent use: one
// translation at a time (Incremental reuses its full translation's).
type labelMaps struct {
	install   string
	byCluster map[string]map[string]string
}

func (l *labelMaps) get(install, cluster string) map[string]string {
	if l == nil || l.install != install {
		return map[string]string{snapshots.LabelManagedBy: install, snapshots.LabelCluster: cluster}
	}
	m, ok := l.byCluster[cluster]
	if !ok {
		m = map[string]string{snapshots.LabelManagedBy: install, snapshots.LabelCluster: cluster}
		l.byCluster[cluster] = m
	}
	return m
}

func (o Options) withDefaults() Options {
	if o.Install == "" {
		o.Install = snapshots.DefaultInstall
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.ManagementCluster == "" {
		o.ManagementCluster = o.Install
	}
	o.labels = &labelMaps{install: o.Install, byCluster: map[string]map[string]string{}}
	return o
}

// Management is the name of the management cluster's input, with the
// defaults applied.
func (o Options) Management() string {
	return o.withDefaults().ManagementCluster
}

// Istio kinds written by translation.
const (
	IstioNetworkingV1       = "networking.istio.io/v1"
	SecurityV1              = "security.istio.io/v1"
	KindDestinationRule     = "DestinationRule"
	KindVirtualService      = "VirtualService"
	KindAuthorizationPolicy = "AuthorizationPolicy"
	KindPeerAuthentication  = "PeerAuthentication"
)

// Kinds of the parents named in the parents annotation, and of the user
// resources that get statuses.
const (
	NetworkingV1          = "networking.meshplane.dev/v1"
	KindTrafficPolicy     = "TrafficPolicy"
	KindAccessPolicy      = "AccessPolicy"
	KindVirtualMesh       = "VirtualMesh"
	parentKindDestination = "discovery.meshplane.dev/v1, Kind=Destination"
	parentKindMesh        = "discovery.meshplane.dev/v1, Kind=Mesh"
	parentKindTraffic     = NetworkingV1 + ", Kind=" + KindTrafficPolicy
	parentKindAccess      = NetworkingV1 + ", Kind=" + KindAccessPolicy
	parentKindVirtualMesh = NetworkingV1 + ", Kind=" + KindVirtualMesh
)

// Translate computes one output snapshot per cluster that has an input. The
// result depends only on the inputs and options: the same inputs give the
// same versions on any replica. Problems with user resources are not
// errors: they are reported in the resources' statuses. An error means an
// output could not be encoded.
func Translate(inputs map[string]*snapshotv1.InputSnapshot, opts Options) (map[string]*snapshotv1.OutputSnapshot, error) {
	outputs, _, err := TranslateWithLastGood(inputs, opts, LastGood{})
	return outputs, err
}

// TranslateWithLastGood is Translate with last-known-good: a policy whose
// current version fails validation is translated from its last valid
// version in last, when there is one. It returns the outputs and the last
// valid versions to pass to the next translation. last is not modified.
func TranslateWithLastGood(inputs map[string]*snapshotv1.InputSnapshot, opts Options, last LastGood) (map[string]*snapshotv1.OutputSnapshot, LastGood, error) {
	r, err := TranslateResult(inputs, opts, last)
	if err != nil {
		return nil, LastGood{}, err
	}
	return r.Outputs, r.LastGood, nil
}

// TranslateResult is TranslateWithLastGood that also returns what was
// applied to each discovered entity, for Describe.
func TranslateResult(inputs map[string]*snapshotv1.InputSnapshot, opts Options, last LastGood) (*Result, error) {
	r, _, err := translateAll(inputs, opts, last)
	return r, err
}

// translateAll is a full translation; it also returns the state an
// incremental translation starts from.
func translateAll(inputs map[string]*snapshotv1.InputSnapshot, opts Options, last LastGood) (*Result, *incState, error) {
	opts = opts.withDefaults()
	next := newLastGood()
	outputs := make(map[string]*snapshotv1.OutputSnapshot, len(inputs))
	for _, cluster := range sortedKeys(inputs) {
		outputs[cluster] = &snapshotv1.OutputSnapshot{
			Cluster:       cluster,
			InputVersions: map[string]string{cluster: inputs[cluster].GetVersion()},
		}
	}

	scope := readScopes(inputs, opts.ManagementCluster)
	set, settingsObjects := readSettings(inputs, opts, last.Settings, scope)
	for c, out := range outputs {
		out.GatewayDetector = GatewayDetector(set.discovery, c)
	}
	ix := NewIndex(inputs, opts.ClusterDomain)
	ix.scope = scope
	vms := applyVirtualMeshes(ix, collectResources(inputs, (*snapshotv1.InputSnapshot).GetVirtualMeshes), last.VirtualMeshes)
	vds := applyVirtualDestinations(ix, vms, collectResources(inputs, (*snapshotv1.InputSnapshot).GetVirtualDestinations), last.VirtualDestinations)
	tr := newTrafficTranslation(ix)
	tr.vds = vds
	tr.fed = newFederationLookup(ix, vms)
	tr.lastGood = last.Traffic
	policies := collectTrafficPolicies(inputs)
	tr.apply(policies)
	// prepare was its last reader: the state kept for the next
	// translation must not hold the previous specs (deleted policies').
	tr.lastGood = nil
	warnPlaintextInStrictMesh(ix, tr, vms)
	access, accessPolicies := applyAccessPolicies(ix, vms, collectResources(inputs, (*snapshotv1.InputSnapshot).GetAccessPolicies), last.Access)

	users := indexUserObjects(inputs, opts.ClusterDomain)
	destObjs := make(map[ObjectKey][]*snapshotv1.Object, len(ix.destinations))
	clientObjs := map[ObjectKey][]clusterObject{}
	alloc := &objectAllocator{left: 2 * len(ix.destinations)}
	for _, d := range ix.destinations {
		objs, err := destinationObjects(d, tr, users, set, opts, alloc)
		if err != nil {
			return nil, nil, err
		}
		destObjs[d.Key] = objs
		outputs[d.Key.Cluster].Objects = append(outputs[d.Key.Cluster].Objects, objs...)
		cobjs, err := clientObjects(d, tr, users, set, opts)
		if err != nil {
			return nil, nil, err
		}
		if len(cobjs) > 0 {
			clientObjs[d.Key] = cobjs
			for _, co := range cobjs {
				if out, ok := outputs[co.cluster]; ok {
					out.Objects = append(out.Objects, co.obj)
				}
			}
		}
	}
	e := newEmitter(opts.enc)
	emitMeshWide(e, vms)
	access.emit(e)
	addrs := map[string]*addrSet{}
	if err := emitFederation(e, ix, vms, tr, addrs); err != nil {
		return nil, nil, err
	}
	emitVirtualDestinations(e, ix, vds, addrs)
	if err := e.flush(outputs, opts); err != nil {
		return nil, nil, err
	}
	apObjs, apShared := destinationAuthorizationPolicies(outputs, ix, access)
	emitIssuedCertificates(outputs, vms)

	for _, p := range policies {
		st, err := trafficPolicyStatus(opts.enc, p)
		if err != nil {
			return nil, nil, err
		}
		outputs[p.Key.Cluster].Statuses = append(outputs[p.Key.Cluster].Statuses, st)
		if g, ok := p.goodVersion(); ok {
			next.Traffic[p.Key] = g
		}
	}
	for _, p := range accessPolicies {
		st, err := accessPolicyStatus(opts.enc, p)
		if err != nil {
			return nil, nil, err
		}
		outputs[p.Key.Cluster].Statuses = append(outputs[p.Key.Cluster].Statuses, st)
		if g, ok := p.goodVersion(); ok {
			next.Access[p.Key] = g
		}
	}
	for _, vm := range vms.all {
		st, err := virtualMeshStatus(opts.enc, vm)
		if err != nil {
			return nil, nil, err
		}
		outputs[vm.Key.Cluster].Statuses = append(outputs[vm.Key.Cluster].Statuses, st)
		if g, ok := vm.goodVersion(); ok {
			next.VirtualMeshes[vm.Key] = g
		}
	}
	for _, so := range settingsObjects {
		st, err := settingsStatus(opts.enc, so)
		if err != nil {
			return nil, nil, err
		}
		outputs[so.Key.Cluster].Statuses = append(outputs[so.Key.Cluster].Statuses, st)
		if g, ok := so.goodVersion(); ok {
			next.Settings[so.Key] = g
		}
	}
	for _, g := range ix.scope.all {
		st, err := scopeGrantStatus(opts.enc, g)
		if err != nil {
			return nil, nil, err
		}
		outputs[g.Key.Cluster].Statuses = append(outputs[g.Key.Cluster].Statuses, st)
	}
	for _, vd := range vds.all {
		st, err := virtualDestinationStatus(opts.enc, vd)
		if err != nil {
			return nil, nil, err
		}
		outputs[vd.Key.Cluster].Statuses = append(outputs[vd.Key.Cluster].Statuses, st)
		if g, ok := vd.goodVersion(); ok {
			next.VirtualDestinations[vd.Key] = g
		}
	}
	// WasmDeploymentPolicies and AccessLogPolicies; the incremental path
	// leaves any change to them to a full translation.
	if err := translateExtensions(inputs, ix, outputs, opts, last, next); err != nil {
		return nil, nil, err
	}
	sealers := sealOutputs(outputs, e, opts.sealed)
	applied := &Applied{inputs: inputs, ix: ix, traffic: tr, policies: policies, access: access, accessPs: accessPolicies, vms: vms, vds: vds}
	res := &Result{Outputs: outputs, LastGood: next, Applied: applied}
	return res, &incState{opts: opts, result: res, set: set, users: users, destObjs: destObjs, clientObjs: clientObjs, exported: exportedSubsetNames(vms, tr), apObjs: apObjs, apShared: apShared, sealers: sealers}, nil
}

// destinationAuthorizationPolicies finds the AuthorizationPolicy written
// for each destination with AccessPolicies. shared holds the destinations
// whose key is also that of a mesh-wide object, which their policy was
// merged into.
func destinationAuthorizationPolicies(outputs map[string]*snapshotv1.OutputSnapshot, ix *Index, access *accessTranslation) (objs map[ObjectKey]*snapshotv1.Object, shared map[ObjectKey]bool) {
	objs, shared = map[ObjectKey]*snapshotv1.Object{}, map[ObjectKey]bool{}
	for cluster, out := range outputs {
		for _, o := range out.GetObjects() {
			if o.GetApiVersion() != SecurityV1 || o.GetKind() != KindAuthorizationPolicy {
				continue
			}
			k := ObjectKey{Cluster: cluster, Namespace: o.GetNamespace(), Name: o.GetName()}
			d, ok := ix.byKey[k]
			if !ok {
				continue
			}
			if ap, _ := access.policy(d); ap == nil || strings.Contains(o.GetAnnotations()[snapshots.AnnotationParents], parentKindVirtualMesh) {
				shared[k] = true
				continue
			}
			objs[k] = o
		}
	}
	return objs, shared
}

// makeObject wraps an encoded spec as flush does.
func makeObject(apiVersion, kind string, at ObjectKey, parents []ParentRef, specJSON []byte, opts Options) *snapshotv1.Object {
	return makeObjectAnnotated(apiVersion, kind, at, encode.ParentsAnnotation(parents), specJSON, opts)
}

// makeObjectAnnotated is makeObject with the annotations already made;
// objects may share them, as they share label maps.
func makeObjectAnnotated(apiVersion, kind string, at ObjectKey, annotations map[string]string, specJSON []byte, opts Options) *snapshotv1.Object {
	return &snapshotv1.Object{
		ApiVersion:  apiVersion,
		Kind:        kind,
		Namespace:   at.Namespace,
		Name:        at.Name,
		Labels:      opts.labels.get(opts.Install, at.Cluster),
		Annotations: annotations,
		Spec:        specJSON,
	}
}

// destinationObjects are the VirtualService (when policies set routes) and
// the DestinationRule of destination d, less those that a user's own
// object for the same host blocks.
//
// alloc, when not nil, hands out the objects and their slice.
func destinationObjects(d *destination, tr *trafficTranslation, users userObjects, set settings, opts Options, alloc *objectAllocator) ([]*snapshotv1.Object, error) {
	var out []*snapshotv1.Object
	st := tr.states[d.Key]
	var vsObj *snapshotv1.Object
	if vs := st.virtualService(); vs != nil {
		if u := users.conflicts(d.Key.Cluster, KindVirtualService, d.Host); len(u) == 0 || reportConflict(set.conflicts, d, d.Host, st.vsParents, tr.policy, KindVirtualService, u) {
			obj, err := newObject(KindVirtualService, d, st.vsParents, vs, nil, opts, alloc.object())
			if err != nil {
				return nil, err
			}
			out = alloc.objects(2)[:1]
			out[0], vsObj = obj, obj
		}
	}
	drParents := st.allDRParents()
	if u := users.conflicts(d.Key.Cluster, KindDestinationRule, d.Host); len(u) > 0 && !reportConflict(set.conflicts, d, d.Host, drParents, tr.policy, KindDestinationRule, u) {
		return out, nil
	}
	// The VirtualService's annotations when its parents are the same.
	var ann map[string]string
	if vsObj != nil && slices.Equal(st.vsParents, drParents) {
		ann = vsObj.Annotations
	}
	obj, err := st.destinationRuleObject(d, drParents, ann, set.defaultTLS, opts, alloc)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = alloc.objects(1)[:0]
	}
	return append(out, obj), nil
}

// clusterObject is an object made for a destination in another cluster
// than the destination's.
type clusterObject struct {
	cluster string
	obj     *snapshotv1.Object
}

// clientObjects are the VirtualServices written for destination d in the
// clusters of the meshes it is federated to (clientVirtualService), for
// its federated host, in the client mesh's namespace as the federated
// ServiceEntry: one per client cluster and namespace (the first client
// mesh's, by key, when two share one), less those a user's own object for
// the host blocks.
func clientObjects(d *destination, tr *trafficTranslation, users userObjects, set settings, opts Options) ([]clusterObject, error) {
	st := tr.states[d.Key]
	if len(st.inForce) == 0 {
		return nil, nil
	}
	// Most clients get the same VirtualService: what was made for a
	// client key without warnings is reused.
	type made struct {
		raw         []byte // nil: no VirtualService
		policies    []ObjectKey
		annotations map[string]string
	}
	var byKey map[string]*made
	var out []clusterObject
	seen := map[ObjectKey]bool{}
	for _, c := range tr.fed.clients(d) {
		at := ObjectKey{Cluster: c.mesh.Key.Cluster, Namespace: c.mesh.Namespace, Name: c.host}
		if seen[at] {
			continue
		}
		seen[at] = true
		key := tr.clientKey(st, c)
		m := byKey[key]
		if m == nil {
			vs, policies, warned := tr.clientVirtualService(st, c)
			m = &made{policies: policies}
			if vs != nil {
				raw, err := opts.enc.Spec(vs)
				if err != nil {
					return nil, fmt.Errorf("%s %s/%s in %s: %w", KindVirtualService, at.Namespace, at.Name, at.Cluster, err)
				}
				parents := make([]ParentRef, 0, len(policies)+2)
				parents = append(parents,
					ParentRef{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster},
					ParentRef{Kind: parentKindVirtualMesh, Name: c.vm.Key.Name, Namespace: c.vm.Key.Namespace, Cluster: c.vm.Key.Cluster})
				for _, p := range policies {
					parents = append(parents, ParentRef{Kind: parentKindTraffic, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster})
				}
				m.raw, m.annotations = raw, encode.ParentsAnnotation(parents)
			}
			if !warned {
				if byKey == nil {
					byKey = map[string]*made{}
				}
				byKey[key] = m
			}
		}
		if m.raw == nil {
			continue
		}
		if u := users.conflicts(at.Cluster, KindVirtualService, c.host); len(u) > 0 && !reportConflict(set.conflicts, d, c.host+" in cluster "+at.Cluster, m.policies, tr.policy, KindVirtualService, u) {
			continue
		}
		out = append(out, clusterObject{cluster: at.Cluster, obj: makeObjectAnnotated(IstioNetworkingV1, KindVirtualService, at, m.annotations, m.raw, opts)})
	}
	return out, nil
}

// newObject wraps an Istio spec for destination d with the labels and
// parents annotation every Meshplane object carries. ann, when not nil, is
// that annotation made already. The object is o, a new one.
func newObject(kind string, d *destination, policies []ObjectKey, spec proto.Message, ann map[string]string, opts Options, o *snapshotv1.Object) (*snapshotv1.Object, error) {
	specJSON, err := opts.enc.Spec(spec)
	if err != nil {
		return nil, fmt.Errorf("%s for %s/%s in %s: %w", kind, d.Key.Namespace, d.Key.Name, d.Key.Cluster, err)
	}
	return newObjectEncoded(kind, d, policies, specJSON, ann, opts, o), nil
}

// newObjectEncoded is newObject for a spec encoded already.
func newObjectEncoded(kind string, d *destination, policies []ObjectKey, specJSON []byte, ann map[string]string, opts Options, o *snapshotv1.Object) *snapshotv1.Object {
	if ann == nil {
		var small [4]ParentRef
		parents := append(small[:0], ParentRef{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster})
		for _, p := range policies {
			parents = append(parents, ParentRef{Kind: parentKindTraffic, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster})
		}
		ann = encode.ParentsAnnotation(parents)
	}
	o.ApiVersion, o.Kind, o.Namespace, o.Name = IstioNetworkingV1, kind, d.Key.Namespace, d.Key.Name
	o.Labels, o.Annotations, o.Spec = opts.labels.get(opts.Install, d.Key.Cluster), ann, specJSON
	return o
}

// warnPlaintextInStrictMesh warns a TrafficPolicy that disables mTLS to a
// destination whose mesh requires it: its clients will be refused.
func warnPlaintextInStrictMesh(ix *Index, tr *trafficTranslation, vms *virtualMeshes) {
	for _, d := range ix.destinations {
		warnPlaintext(tr, vms, d)
	}
}

func warnPlaintext(tr *trafficTranslation, vms *virtualMeshes, d *destination) {
	st := tr.states[d.Key]
	if st.tlsMode != networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_DISABLE {
		return
	}
	vm := vms.vmOf(d.Mesh)
	if vm == nil || !vm.sharedMTLS() {
		return
	}
	p := st.destOwners[fieldMTLS]
	if as := p.Status.GetDestinations()[d.Key.String()]; as != nil {
		as.Warnings = append(as.Warnings, fmt.Sprintf("spec.policy.mtls.istio.tlsMode: VirtualMesh %s requires STRICT mTLS in mesh %s.%s; clients sending plaintext to this destination will be refused (no PERMISSIVE PeerAuthentication is written)", vm.Key, d.Mesh.Name, d.Mesh.Namespace))
	}
}

// resourceStatus encodes st as the status to write to one user resource,
// the resource of kind at key, computed for generation.
func resourceStatus(enc encode.Encoder, apiVersion, kind string, key ObjectKey, generation int64, st proto.Message) (*snapshotv1.ResourceStatus, error) {
	raw, err := enc.Spec(st)
	if err != nil {
		return nil, fmt.Errorf("status of %s %s: %w", kind, key, err)
	}
	return &snapshotv1.ResourceStatus{
		ApiVersion: apiVersion, Kind: kind, Namespace: key.Namespace, Name: key.Name,
		ObservedGeneration: generation, Status: raw,
	}, nil
}

// ParentRef names a resource an output object was translated from: the
// parents annotation (encode.Parents) lists them.
type ParentRef = encode.ParentRef
