// Package meshcrs decodes Meshplane's own custom resources (VirtualMesh,
// TrafficPolicy, AccessPolicy, VirtualDestination, WasmDeploymentPolicy,
// AccessLogPolicy, Settings), read through
// client-go as unstructured objects, into their proto messages. The agent
// and ingest (for the management cluster) read the same resources into
// input snapshots this way.
package meshcrs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resources are decoded Meshplane resources, by type.
type Resources struct {
	VirtualMeshes       []*networkingv1.VirtualMesh
	TrafficPolicies     []*networkingv1.TrafficPolicy
	AccessPolicies      []*networkingv1.AccessPolicy
	VirtualDestinations []*networkingv1.VirtualDestination
	WasmDeployments     []*networkingv1.WasmDeploymentPolicy
	AccessLogPolicies   []*observabilityv1.AccessLogPolicy
	Settings            []*settingsv1.Settings
}

// AddTo appends r to the user-resource lists of s.
func (r Resources) AddTo(s *snapshotv1.InputSnapshot) {
	s.VirtualMeshes = append(s.VirtualMeshes, r.VirtualMeshes...)
	s.TrafficPolicies = append(s.TrafficPolicies, r.TrafficPolicies...)
	s.AccessPolicies = append(s.AccessPolicies, r.AccessPolicies...)
	s.VirtualDestinations = append(s.VirtualDestinations, r.VirtualDestinations...)
	s.WasmDeploymentPolicies = append(s.WasmDeploymentPolicies, r.WasmDeployments...)
	s.AccessLogPolicies = append(s.AccessLogPolicies, r.AccessLogPolicies...)
	s.Settings = append(s.Settings, r.Settings...)
}

// Kind is one Meshplane resource type that is read into input snapshots.
type Kind struct {
	GVR  schema.GroupVersionResource
	Kind string
	// add decodes spec and adds the resource to r.
	add func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error
}

// APIVersion is the kind's group/version, as in an object's apiVersion.
func (k Kind) APIVersion() string { return k.GVR.GroupVersion().String() }

var unmarshal = protojson.UnmarshalOptions{}

func decodeSpec[S proto.Message](spec []byte, s S) (S, error) {
	if len(spec) == 0 {
		return s, nil
	}
	if err := unmarshal.Unmarshal(spec, s); err != nil {
		return s, err
	}
	return s, nil
}

var kinds = []Kind{
	{
		GVR: schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "virtualmeshes"}, Kind: "VirtualMesh",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &networkingv1.VirtualMeshSpec{})
			if err == nil {
				r.VirtualMeshes = append(r.VirtualMeshes, &networkingv1.VirtualMesh{Metadata: md, Spec: s})
			}
			return err
		},
	},
	{
		GVR: schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "trafficpolicies"}, Kind: "TrafficPolicy",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &networkingv1.TrafficPolicySpec{})
			if err == nil {
				r.TrafficPolicies = append(r.TrafficPolicies, &networkingv1.TrafficPolicy{Metadata: md, Spec: s})
			}
			return err
		},
	},
	{
		GVR: schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "accesspolicies"}, Kind: "AccessPolicy",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &networkingv1.AccessPolicySpec{})
			if err == nil {
				r.AccessPolicies = append(r.AccessPolicies, &networkingv1.AccessPolicy{Metadata: md, Spec: s})
			}
			return err
		},
	},
	{
		GVR: schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "virtualdestinations"}, Kind: "VirtualDestination",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &networkingv1.VirtualDestinationSpec{})
			if err == nil {
				r.VirtualDestinations = append(r.VirtualDestinations, &networkingv1.VirtualDestination{Metadata: md, Spec: s})
			}
			return err
		},
	},
	{
		GVR: schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "wasmdeploymentpolicies"}, Kind: "WasmDeploymentPolicy",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &networkingv1.WasmDeploymentPolicySpec{})
			if err == nil {
				r.WasmDeployments = append(r.WasmDeployments, &networkingv1.WasmDeploymentPolicy{Metadata: md, Spec: s})
			}
			return err
		},
	},
	{
		GVR: schema.GroupVersionResource{Group: "observability.meshplane.dev", Version: "v1", Resource: "accesslogpolicies"}, Kind: "AccessLogPolicy",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &observabilityv1.AccessLogPolicySpec{})
			if err == nil {
				r.AccessLogPolicies = append(r.AccessLogPolicies, &observabilityv1.AccessLogPolicy{Metadata: md, Spec: s})
			}
			return err
		},
	},
	{
		GVR: schema.GroupVersionResource{Group: "settings.meshplane.dev", Version: "v1", Resource: "settings"}, Kind: "Settings",
		add: func(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
			s, err := decodeSpec(spec, &settingsv1.SettingsSpec{})
			if err == nil {
				r.Settings = append(r.Settings, &settingsv1.Settings{Metadata: md, Spec: s})
			}
			return err
		},
	},
}

// Kinds returns every Meshplane resource type read into input snapshots.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// ObjectMeta is the part of a resource's metadata that snapshots carry.
// Status is not read: Meshplane writes it, and reading it back would make
// every status write a new snapshot.
func ObjectMeta(u *unstructured.Unstructured, cluster string) *commonv1.ObjectMeta {
	md := &commonv1.ObjectMeta{
		Name: u.GetName(), Namespace: u.GetNamespace(), Cluster: cluster,
		Labels: u.GetLabels(), Generation: u.GetGeneration(), Uid: string(u.GetUID()),
	}
	if ann := u.GetAnnotations(); len(ann) > 0 {
		delete(ann, corev1.LastAppliedConfigAnnotation)
		if len(ann) > 0 {
			md.Annotations = ann
		}
	}
	if ts := u.GetCreationTimestamp(); !ts.IsZero() {
		md.CreationTimestamp = timestamppb.New(ts.Time)
	}
	return md
}

// Decode adds u, read from cluster, to r. The error names the offending
// field (through protojson's position in the spec). A resource whose spec
// does not decode is added all the same, with an empty spec and the error
// in metadata.decodeError: it must not vanish from a snapshot, or
// translation would take it for deleted and remove what it made.
// Translation reports it INVALID, naming the field, and keeps its last
// valid version in force.
func (k Kind) Decode(r *Resources, u *unstructured.Unstructured, cluster string) error {
	md := ObjectMeta(u, cluster)
	var spec []byte
	if s, ok := u.Object["spec"]; ok && s != nil {
		b, err := json.Marshal(s)
		if err != nil {
			return k.undecoded(r, md, "spec", fmt.Errorf("encode spec: %w", err))
		}
		spec = b
	}
	if err := k.DecodeSpec(r, md, spec); err != nil {
		if field := FieldAt(spec, err); field != "" {
			return k.undecoded(r, md, "spec."+field, fmt.Errorf("field spec.%s: %w", field, err))
		}
		return k.undecoded(r, md, "spec", fmt.Errorf("spec: %w", err))
	}
	return nil
}

// undecoded adds the resource with an empty spec and a decode error that
// starts with the field's path, as validation errors do, and returns err.
func (k Kind) undecoded(r *Resources, md *commonv1.ObjectMeta, field string, err error) error {
	md.DecodeError = field + ": does not decode (" + errors.Unwrap(err).Error() + ")"
	if aerr := k.add(r, md, nil); aerr != nil {
		return errors.Join(err, aerr) // an empty spec always decodes
	}
	return err
}

// DecodeSpec decodes spec, the resource's spec as JSON (empty for none),
// and adds the resource with metadata md to r. The error is protojson's:
// FieldAt names the field it is about.
func (k Kind) DecodeSpec(r *Resources, md *commonv1.ObjectMeta, spec []byte) error {
	return k.add(r, md, spec)
}

var errPosition = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// FieldAt turns the position in a protojson error into the JSON path
// ("a.b[2].c") of the offending field: protojson names the position, not
// the field, and spec is compact JSON on one line. It is empty when the
// error names no position.
func FieldAt(spec []byte, err error) string {
	m := errPosition.FindStringSubmatch(err.Error())
	if m == nil || m[1] != "1" {
		return ""
	}
	col, _ := strconv.Atoi(m[2])
	// The column counts runes from 1.
	off := 0
	for i := 1; i < col && off < len(spec); i++ {
		_, size := utf8.DecodeRune(spec[off:])
		off += size
	}
	return jsonPathAt(spec, int64(off))
}

// jsonPathAt returns the path ("a.b[2].c") of the value or key that holds
// byte offset off.
func jsonPathAt(data []byte, off int64) string {
	type frame struct {
		array   bool
		key     string
		idx     int
		wantKey bool
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.idx)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.array {
			top.idx++
		} else {
			top.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return path()
		}
		end := dec.InputOffset()
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
			stack[n-1].key, _ = tok.(string)
			stack[n-1].wantKey = false
			if end > off {
				return path()
			}
			continue
		}
		if end > off {
			return path()
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{array: d == '[', wantKey: d == '{'})
			continue
		}
		valueDone()
	}
}
