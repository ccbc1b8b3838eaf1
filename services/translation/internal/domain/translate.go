// Package domain is the translation model and rules: a pure function from
// every cluster's input snapshot to every cluster's output snapshot. It knows
// nothing of RPC, Redis or Kubernetes clients; the snapshot and Istio messages
// are its data model.
package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
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
)

// Translate computes one output snapshot per cluster that has an input. The
// result depends only on the inputs and options: the same inputs give the
// same versions on any replica.
func Translate(inputs map[string]*snapshotv1.InputSnapshot, opts Options) (map[string]*snapshotv1.OutputSnapshot, error) {
	opts = opts.withDefaults()
	clusters := make([]string, 0, len(inputs))
	for c := range inputs {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)

	outputs := make(map[string]*snapshotv1.OutputSnapshot, len(inputs))
	for _, cluster := range clusters {
		in := inputs[cluster]
		out := &snapshotv1.OutputSnapshot{
			Cluster:       cluster,
			InputVersions: map[string]string{cluster: in.GetVersion()},
		}
		for _, d := range in.GetDestinations() {
			obj, err := defaultDestinationRule(cluster, d, opts)
			if err != nil {
				return nil, err
			}
			if obj != nil {
				out.Objects = append(out.Objects, obj)
			}
		}
		snapshots.SealOutput(out)
		outputs[cluster] = out
	}
	return outputs, nil
}

// defaultDestinationRule is the DestinationRule Meshplane owns for every
// discovered Service: Istio mutual TLS to its FQDN.
func defaultDestinationRule(cluster string, d *discoveryv1.Destination, opts Options) (*snapshotv1.Object, error) {
	ks := d.GetSpec().GetKubeService()
	ref := ks.GetRef()
	if ref.GetName() == "" || ref.GetNamespace() == "" {
		return nil, nil
	}
	host := ks.GetHostname()
	if host == "" {
		host = fmt.Sprintf("%s.%s.svc.%s", ref.GetName(), ref.GetNamespace(), opts.ClusterDomain)
	}
	spec := &networkingv1alpha3.DestinationRule{
		Host: host,
		TrafficPolicy: &networkingv1alpha3.TrafficPolicy{
			Tls: &networkingv1alpha3.ClientTLSSettings{Mode: networkingv1alpha3.ClientTLSSettings_ISTIO_MUTUAL},
		},
	}
	specJSON, err := MarshalSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("destination rule for %s/%s: %w", ref.GetNamespace(), ref.GetName(), err)
	}
	return &snapshotv1.Object{
		ApiVersion: IstioNetworkingV1,
		Kind:       KindDestinationRule,
		Namespace:  ref.GetNamespace(),
		Name:       ref.GetName(),
		Labels: map[string]string{
			snapshots.LabelManagedBy: opts.Install,
			snapshots.LabelCluster:   cluster,
		},
		Annotations: map[string]string{
			snapshots.AnnotationParents: Parents(ParentRef{
				Kind: "discovery.meshplane.dev/v1, Kind=Destination", Name: ref.GetName(), Namespace: ref.GetNamespace(), Cluster: cluster,
			}),
		},
		Spec: specJSON,
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
// JSON with sorted keys.
func Parents(refs ...ParentRef) string {
	byKind := map[string][]ParentRef{}
	for _, r := range refs {
		byKind[r.Kind] = append(byKind[r.Kind], r)
	}
	b, _ := json.Marshal(byKind) // maps marshal with sorted keys
	return string(b)
}
