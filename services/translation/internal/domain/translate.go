// Package domain is the translation model and rules: a pure function from
// every cluster's input snapshot to every cluster's output snapshot. It knows
// nothing of RPC, Redis or Kubernetes clients; the snapshot and Istio messages
// are its data model.
package domain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Options are the install-wide settings translation needs.
type Options struct {
	// Install is the value of the managed-by label.
	Install string
	// ClusterDomain is the DNS suffix of Services, usually cluster.local.
	ClusterDomain string
}

func (o Options) withDefaults() Options {
	if o.Install == "" {
		o.Install = snapshots.DefaultInstall
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	return o
}

// Istio kinds written by translation.
const (
	IstioNetworkingV1   = "networking.istio.io/v1"
	KindDestinationRule = "DestinationRule"
	KindVirtualService  = "VirtualService"
)

// Kinds of the parents named in the parents annotation, and of the user
// resources that get statuses.
const (
	NetworkingV1          = "networking.meshplane.dev/v1"
	KindTrafficPolicy     = "TrafficPolicy"
	parentKindDestination = "discovery.meshplane.dev/v1, Kind=Destination"
	parentKindTraffic     = NetworkingV1 + ", Kind=" + KindTrafficPolicy
)

// Translate computes one output snapshot per cluster that has an input. The
// result depends only on the inputs and options: the same inputs give the
// same versions on any replica. Problems with user resources are not
// errors: they are reported in the resources' statuses. An error means an
// output could not be encoded.
func Translate(inputs map[string]*snapshotv1.InputSnapshot, opts Options) (map[string]*snapshotv1.OutputSnapshot, error) {
	opts = opts.withDefaults()
	outputs := make(map[string]*snapshotv1.OutputSnapshot, len(inputs))
	for _, cluster := range sortedKeys(inputs) {
		outputs[cluster] = &snapshotv1.OutputSnapshot{
			Cluster:       cluster,
			InputVersions: map[string]string{cluster: inputs[cluster].GetVersion()},
		}
	}

	ix := NewIndex(inputs, opts.ClusterDomain)
	tr := newTrafficTranslation(ix)
	policies := collectTrafficPolicies(inputs)
	tr.apply(policies)

	for _, d := range ix.destinations {
		out := outputs[d.Key.Cluster]
		st := tr.states[d.Key]
		if vs := st.virtualService(); vs != nil {
			obj, err := newObject(KindVirtualService, d, st.vsParents, vs, opts)
			if err != nil {
				return nil, err
			}
			out.Objects = append(out.Objects, obj)
		}
		obj, err := newObject(KindDestinationRule, d, st.drParents, st.destinationRule(d), opts)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, obj)
	}
	for _, p := range policies {
		st, err := trafficPolicyStatus(p)
		if err != nil {
			return nil, err
		}
		outputs[p.Key.Cluster].Statuses = append(outputs[p.Key.Cluster].Statuses, st)
	}
	for _, out := range outputs {
		snapshots.SealOutput(out)
	}
	return outputs, nil
}

// newObject wraps an Istio spec for destination d with the labels and
// parents annotation every Meshplane object carries.
func newObject(kind string, d *destination, policies []ObjectKey, spec proto.Message, opts Options) (*snapshotv1.Object, error) {
	specJSON, err := MarshalSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("%s for %s/%s in %s: %w", kind, d.Key.Namespace, d.Key.Name, d.Key.Cluster, err)
	}
	parents := make([]ParentRef, 0, len(policies)+1)
	parents = append(parents, ParentRef{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster})
	for _, p := range policies {
		parents = append(parents, ParentRef{Kind: parentKindTraffic, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster})
	}
	return &snapshotv1.Object{
		ApiVersion: IstioNetworkingV1,
		Kind:       kind,
		Namespace:  d.Key.Namespace,
		Name:       d.Key.Name,
		Labels: map[string]string{
			snapshots.LabelManagedBy: opts.Install,
			snapshots.LabelCluster:   d.Key.Cluster,
		},
		Annotations: map[string]string{snapshots.AnnotationParents: Parents(parents...)},
		Spec:        specJSON,
	}, nil
}

// MarshalSpec encodes an Istio spec as compact JSON. protojson adds random
// whitespace on purpose; compacting removes it, so that the bytes, and with
// them the snapshot version, are the same in every process.
func MarshalSpec(m proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ParentRef names a resource an output object was translated from.
type ParentRef struct {
	Kind      string `json:"-"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
}

// Parents renders the parents annotation: parent refs grouped by kind, as
// JSON with sorted keys, each kind's refs sorted and without duplicates.
func Parents(refs ...ParentRef) string {
	byKind := map[string][]ParentRef{}
	for _, r := range refs {
		byKind[r.Kind] = append(byKind[r.Kind], r)
	}
	for k, rs := range byKind {
		slices.SortFunc(rs, func(a, b ParentRef) int {
			return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		byKind[k] = slices.Compact(rs)
	}
	b, _ := json.Marshal(byKind) // maps marshal with sorted keys
	return string(b)
}
