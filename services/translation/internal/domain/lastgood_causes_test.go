package domain_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// userResourceFields are the InputSnapshot fields that hold user
// resources, every kind translation reads.
var userResourceFields = []protoreflect.Name{
	"virtual_meshes", "traffic_policies", "access_policies", "virtual_destinations",
	"settings", "wasm_deployment_policies", "access_log_policies",
}

// breakage makes a bad version of a user resource's spec: it changes spec
// in place (a fresh, empty one for a decode error) and returns the text
// its status must show, or "" when it does not apply to the resource.
type breakage struct {
	name  string
	apply func(kind string, md *commonv1.ObjectMeta, spec protoreflect.Message) string
}

var breakages = []breakage{
	{name: "decode error", apply: func(_ string, md *commonv1.ObjectMeta, spec protoreflect.Message) string {
		// What the agent sends for a spec that passed the CRD schema but
		// does not decode: its metadata, an empty spec, the error.
		spec.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			spec.Clear(fd)
			return true
		})
		md.DecodeError = "spec.policy.retries.perTryTimeout: does not decode (out of range)"
		return md.DecodeError
	}},
	{name: "dangling reference", apply: func(kind string, _ *commonv1.ObjectMeta, spec protoreflect.Message) string {
		switch s := spec.Interface().(type) {
		case *networkingv1.TrafficPolicySpec:
			if s.Policy == nil {
				s.Policy = &networkingv1.TrafficPolicySpec_Policy{}
			}
			s.Policy.Mirror = &networkingv1.TrafficPolicySpec_Policy_Mirror{
				DestinationType: &networkingv1.TrafficPolicySpec_Policy_Mirror_KubeService{KubeService: &commonv1.ClusterObjectRef{Name: "nosuch"}},
				Percentage:      50,
			}
			return "spec.policy.mirror.kubeService: service nosuch."
		case *networkingv1.VirtualMeshSpec:
			s.Meshes = append(s.Meshes, &commonv1.ObjectRef{Name: "nosuch", Namespace: "istio-system"})
			return "mesh nosuch.istio-system not found"
		case *networkingv1.VirtualDestinationSpec:
			if st := s.GetStatic(); st != nil {
				st.Destinations = append(st.Destinations, &networkingv1.VirtualDestinationSpec_BackingDestination{
					Type: &networkingv1.VirtualDestinationSpec_BackingDestination_KubeService{KubeService: &commonv1.ClusterObjectRef{Name: "nosuch"}},
				})
				return "service nosuch."
			}
		}
		return ""
	}},
}

// Every way a resource that was ACCEPTED can go bad leaves what it made in
// force: for every golden case, every accepted resource of every kind, and
// every breakage that applies, the outputs keep every object they had, and
// the resource's status is INVALID with lastKnownGood, the new
// generation and the error. The next translation keeps it so, and
// deleting the resource removes its effect.
func TestLastGoodHoldsForEveryCause(t *testing.T) {
	cases, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]int{}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		inputs := readInputs(t, filepath.Join(goldenDir, c.Name(), "input.yaml"))
		base, err := domain.TranslateResult(inputs, domain.Options{}, domain.LastGood{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		for _, cluster := range mapsKeys(inputs) {
			for _, field := range userResourceFields {
				list := inputs[cluster].ProtoReflect().Get(inputs[cluster].ProtoReflect().Descriptor().Fields().ByName(field)).List()
				for i := range list.Len() {
					res := list.Get(i).Message().Interface().(userResource)
					kind := string(res.ProtoReflect().Descriptor().Name())
					md := res.GetMetadata()
					st := statusOf(t, base.Outputs[cluster], kind, md.GetNamespace(), md.GetName())
					if st == nil || st.State != "ACCEPTED" && st.State != "FAILED" {
						continue
					}
					for _, b := range breakages {
						if b.name == "dangling reference" && kind == "TrafficPolicy" && len(st.Destinations) <= 2 {
							continue // it selects nothing: there is nothing to resolve
						}
						bad, want := breakResource(inputs, cluster, field, i, b)
						if want == "" {
							continue
						}
						name := fmt.Sprintf("%s/%s/%s %s/%s: %s", c.Name(), cluster, kind, md.GetNamespace(), md.GetName(), b.name)
						tested[kind+" "+b.name]++
						checkHeld(t, name, inputs, base, bad, cluster, kind, md, want)
						for _, other := range mapsKeys(inputs) {
							if other != cluster {
								tested[kind+" "+b.name+", another cluster missing"]++
								checkKeptWhileMissing(t, name+", "+other+" missing", base, bad, other, cluster, kind, md, want)
							}
						}
					}
				}
			}
		}
	}
	for _, want := range []string{
		"TrafficPolicy decode error", "AccessPolicy decode error", "VirtualMesh decode error", "VirtualDestination decode error",
		"Settings decode error", "WasmDeploymentPolicy decode error", "AccessLogPolicy decode error",
		"TrafficPolicy dangling reference", "VirtualMesh dangling reference", "VirtualDestination dangling reference",
	} {
		if tested[want] == 0 {
			t.Errorf("no golden case has an accepted resource to test %q with", want)
		}
	}
	t.Logf("tested: %v", tested)
}

type userResource interface {
	proto.Message
	GetMetadata() *commonv1.ObjectMeta
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// breakResource copies inputs with resource i of field in cluster's input
// broken by b at the next generation. want is "" when b does not apply.
func breakResource(inputs map[string]*snapshotv1.InputSnapshot, cluster string, field protoreflect.Name, i int, b breakage) (map[string]*snapshotv1.InputSnapshot, string) {
	out := map[string]*snapshotv1.InputSnapshot{}
	for c, in := range inputs {
		out[c] = in
	}
	in := proto.Clone(inputs[cluster]).(*snapshotv1.InputSnapshot)
	list := in.ProtoReflect().Mutable(in.ProtoReflect().Descriptor().Fields().ByName(field)).List()
	res := list.Get(i).Message()
	md := res.Interface().(userResource).GetMetadata()
	md.Generation++
	spec := res.Mutable(res.Descriptor().Fields().ByName("spec")).Message()
	want := b.apply(string(res.Descriptor().Name()), md, spec)
	snapshots.SealInput(in)
	out[cluster] = in
	return out, want
}

func checkHeld(t *testing.T, name string, inputs map[string]*snapshotv1.InputSnapshot, base *domain.Result, bad map[string]*snapshotv1.InputSnapshot, cluster, kind string, md *commonv1.ObjectMeta, want string) {
	t.Helper()
	// The incremental path gives what a full translation gives.
	inc := domain.NewIncremental(domain.Options{})
	if _, err := inc.Translate(inputs, domain.LastGood{}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ir, err := inc.Translate(bad, base.LastGood)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	full, err := domain.TranslateResult(bad, domain.Options{}, base.LastGood)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for c, out := range full.Outputs {
		if ir.Outputs[c].GetVersion() != out.GetVersion() {
			t.Errorf("%s: incremental translation of cluster %s differs from a full one", name, c)
		}
	}
	last := base.LastGood
	for round := 1; round <= 2; round++ {
		r, err := domain.TranslateResult(bad, domain.Options{}, last)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		last = r.LastGood
		for c, out := range base.Outputs {
			if diff := objectDiff(out, r.Outputs[c]); diff != "" {
				t.Errorf("%s, round %d: cluster %s lost or changed objects: %s", name, round, c, diff)
			}
			if !equalLists(out.GetIssuedCertificates(), r.Outputs[c].GetIssuedCertificates()) ||
				!equalLists(out.GetWasmFilters(), r.Outputs[c].GetWasmFilters()) ||
				!equalLists(out.GetAccessLogPolicies(), r.Outputs[c].GetAccessLogPolicies()) {
				t.Errorf("%s, round %d: cluster %s: certificates, Wasm filters or access-log policies changed", name, round, c)
			}
		}
		st := statusOf(t, r.Outputs[cluster], kind, md.GetNamespace(), md.GetName())
		if st == nil || st.State != "INVALID" || !st.LastKnownGood || st.ObservedGeneration != fmt.Sprint(md.GetGeneration()+1) ||
			!strings.Contains(strings.Join(st.Errors, "\n"), want) || !strings.Contains(strings.Join(st.Errors, "\n"), "stays in force") {
			t.Errorf("%s, round %d: status %+v, want INVALID, lastKnownGood, observedGeneration %d and errors with %q", name, round, st, md.GetGeneration()+1, want)
		}
	}
	// Deleting the resource removes what only it made.
	gone := map[string]*snapshotv1.InputSnapshot{}
	for c, in := range bad {
		gone[c] = in
	}
	in := proto.Clone(bad[cluster]).(*snapshotv1.InputSnapshot)
	for _, f := range userResourceFields {
		fd := in.ProtoReflect().Descriptor().Fields().ByName(f)
		list := in.ProtoReflect().Mutable(fd).List()
		kept := in.ProtoReflect().NewField(fd).List()
		for i := range list.Len() {
			m := list.Get(i).Message()
			rmd := m.Interface().(userResource).GetMetadata()
			if string(m.Descriptor().Name()) == kind && rmd.GetNamespace() == md.GetNamespace() && rmd.GetName() == md.GetName() {
				continue
			}
			kept.Append(list.Get(i))
		}
		in.ProtoReflect().Set(fd, protoreflect.ValueOfList(kept))
	}
	snapshots.SealInput(in)
	gone[cluster] = in
	r, err := domain.TranslateResult(gone, domain.Options{}, last)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if statusOf(t, r.Outputs[cluster], kind, md.GetNamespace(), md.GetName()) != nil {
		t.Errorf("%s: a deleted resource still has a status", name)
	}
	if keptFor(r.LastGood, kind, domain.ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}) {
		t.Errorf("%s: the deleted resource's last valid version is still kept", name)
	}
}

// checkKeptWhileMissing: a bad version of an accepted resource translated
// while another cluster's input is missing (a restart with that cluster
// down, the case the fault-sequence test found) keeps the last valid
// version, even when it does not resolve without that cluster; once the
// cluster reports, the resource is INVALID with lastKnownGood and every
// output is as it was.
func checkKeptWhileMissing(t *testing.T, name string, base *domain.Result, bad map[string]*snapshotv1.InputSnapshot, missing, cluster, kind string, md *commonv1.ObjectMeta, want string) {
	t.Helper()
	without := map[string]*snapshotv1.InputSnapshot{}
	for c, in := range bad {
		if c != missing {
			without[c] = in
		}
	}
	key := domain.ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}
	r, err := domain.TranslateResult(without, domain.Options{}, base.LastGood)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !keptFor(r.LastGood, kind, key) {
		t.Errorf("%s: the last valid version was dropped", name)
		return
	}
	back, err := domain.TranslateResult(bad, domain.Options{}, r.LastGood)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for c, out := range base.Outputs {
		if diff := objectDiff(out, back.Outputs[c]); diff != "" {
			t.Errorf("%s, %s back: cluster %s lost or changed objects: %s", name, missing, c, diff)
		}
	}
	st := statusOf(t, back.Outputs[cluster], kind, md.GetNamespace(), md.GetName())
	if st == nil || st.State != "INVALID" || !st.LastKnownGood || !strings.Contains(strings.Join(st.Errors, "\n"), want) {
		t.Errorf("%s, %s back: status %+v, want INVALID with lastKnownGood and %q", name, missing, st, want)
	}
}

// keptFor says whether lg holds a last valid version of the resource.
func keptFor(lg domain.LastGood, kind string, k domain.ObjectKey) bool {
	var ok bool
	switch kind {
	case "TrafficPolicy":
		_, ok = lg.Traffic[k]
	case "AccessPolicy":
		_, ok = lg.Access[k]
	case "VirtualMesh":
		_, ok = lg.VirtualMeshes[k]
	case "VirtualDestination":
		_, ok = lg.VirtualDestinations[k]
	case "Settings":
		_, ok = lg.Settings[k]
	case "WasmDeploymentPolicy":
		_, ok = lg.Wasm[k]
	case "AccessLogPolicy":
		_, ok = lg.AccessLogs[k]
	}
	return ok
}

type genericStatus struct {
	Destinations       json.RawMessage `json:"destinations"`
	ObservedGeneration string          `json:"observedGeneration"`
	State              string          `json:"state"`
	Errors             []string        `json:"errors"`
	LastKnownGood      bool            `json:"lastKnownGood"`
}

func statusOf(t *testing.T, out *snapshotv1.OutputSnapshot, kind, namespace, name string) *genericStatus {
	t.Helper()
	for _, s := range out.GetStatuses() {
		if s.GetKind() == kind && s.GetNamespace() == namespace && s.GetName() == name {
			st := &genericStatus{}
			if err := json.Unmarshal(s.GetStatus(), st); err != nil {
				t.Fatal(err)
			}
			if st.State == "" {
				st.State = "PENDING"
			}
			if st.ObservedGeneration == "" {
				st.ObservedGeneration = "0"
			}
			return st
		}
	}
	return nil
}

// objectDiff names the objects of want that got lacks or holds otherwise.
func objectDiff(want, got *snapshotv1.OutputSnapshot) string {
	key := func(o *snapshotv1.Object) string { return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName() }
	have := map[string]*snapshotv1.Object{}
	for _, o := range got.GetObjects() {
		have[key(o)] = o
	}
	var diffs []string
	for _, o := range want.GetObjects() {
		g, ok := have[key(o)]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+key(o))
		case !bytes.Equal(g.GetSpec(), o.GetSpec()) || !proto.Equal(&snapshotv1.Object{Labels: g.Labels, Annotations: g.Annotations}, &snapshotv1.Object{Labels: o.Labels, Annotations: o.Annotations}):
			diffs = append(diffs, fmt.Sprintf("changed %s: %s -> %s", key(o), o.GetSpec(), g.GetSpec()))
		}
	}
	return strings.Join(diffs, "; ")
}

func equalLists[M proto.Message](a, b []M) bool {
	return slices.EqualFunc(a, b, func(x, y M) bool { return proto.Equal(x, y) })
}
