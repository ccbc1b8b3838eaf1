package domain_test

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

// referenceEstate builds the DESIGN.md reference estate without
// federation: c clusters, each with one mesh with an east-west gateway, s
// services each, two workloads (v1, v2) per service; one VirtualMesh of
// every mesh with shared mTLS and global access ENABLED; p TrafficPolicies,
// each selecting one service with 3 retries and a 50/50 shift to v1/v2;
// and p/2 AccessPolicies, each letting one service's identity call the
// next service with GET on port 9080. Policies are applied in the
// management cluster.
func referenceEstate(c, s, p int) map[string]*snapshotv1.InputSnapshot {
	return federatedEstate(c, s, p, nil)
}

// federatedEstate is the reference estate with the VirtualMesh's
// federation set to fed.
func federatedEstate(c, s, p int, fed *networkingv1.VirtualMeshSpec_Federation) map[string]*snapshotv1.InputSnapshot {
	inputs := map[string]*snapshotv1.InputSnapshot{}
	vm := &networkingv1.VirtualMesh{
		Metadata: &commonv1.ObjectMeta{Name: "global", Namespace: "meshplane", Generation: 1},
		Spec: &networkingv1.VirtualMeshSpec{
			MtlsConfig:         &networkingv1.VirtualMeshSpec_MTLSConfig{TrustModel: &networkingv1.VirtualMeshSpec_MTLSConfig_Shared{Shared: &networkingv1.VirtualMeshSpec_MTLSConfig_SharedTrust{}}},
			GlobalAccessPolicy: networkingv1.VirtualMeshSpec_ENABLED,
			Federation:         fed,
		},
	}
	for ci := range c {
		cluster := fmt.Sprintf("cluster-%03d", ci)
		in := &snapshotv1.InputSnapshot{Cluster: cluster}
		m := fuzzMesh(cluster, "cluster.local")
		m.GetSpec().GetIstio().IngressGateways = nil
		in.Meshes = append(in.Meshes, m)
		vm.Spec.Meshes = append(vm.Spec.Meshes, &commonv1.ObjectRef{Name: m.GetMetadata().GetName(), Namespace: m.GetMetadata().GetNamespace()})
		for si := range s {
			name := fmt.Sprintf("svc-%04d", si)
			d := fuzzDestination(cluster, name)
			if si%10 == 0 {
				// A tenth of the services carry the label that selective
				// federation exports.
				d.GetSpec().GetKubeService().Labels["export"] = "true"
			}
			in.Destinations = append(in.Destinations, d)
			for _, v := range []string{"v1", "v2"} {
				in.Workloads = append(in.Workloads, fuzzWorkload(cluster, name+"-"+v, map[string]string{"app": name, "version": v}))
			}
		}
		inputs[cluster] = in
	}
	// Policies are applied in the management cluster, where they may
	// select every cluster.
	first := "meshplane"
	inputs[first] = &snapshotv1.InputSnapshot{Cluster: first}
	for pi := range p {
		ci, si := pi%c, (pi/c)%s
		shift := func(v string) *networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination {
			return &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{
				Weight: 50,
				DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeService{
					KubeService: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination{
						Name: fmt.Sprintf("svc-%04d", si), Subset: map[string]string{"version": v},
					},
				},
			}
		}
		inputs[first].TrafficPolicies = append(inputs[first].TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("policy-%05d", pi), Namespace: "default", Cluster: first, Generation: 1},
			Spec: &networkingv1.TrafficPolicySpec{
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{
						Name: fmt.Sprintf("svc-%04d", si), Namespace: "default", Cluster: fmt.Sprintf("cluster-%03d", ci),
					}}},
				}}},
				Policy: &networkingv1.TrafficPolicySpec_Policy{
					Retries:      &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 3},
					TrafficShift: &networkingv1.TrafficPolicySpec_Policy_MultiDestination{Destinations: []*networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{shift("v1"), shift("v2")}},
				},
			},
		})
	}
	for ai := range p / 2 {
		ci, si := ai%c, (ai/c)%s
		cluster := fmt.Sprintf("cluster-%03d", ci)
		inputs[first].AccessPolicies = append(inputs[first].AccessPolicies, &networkingv1.AccessPolicy{
			Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("access-%05d", ai), Namespace: "default", Cluster: first, Generation: 1},
			Spec: &networkingv1.AccessPolicySpec{
				SourceSelector: []*networkingv1.IdentitySelector{{Type: &networkingv1.IdentitySelector_KubeServiceAccountRefs_{
					KubeServiceAccountRefs: &networkingv1.IdentitySelector_KubeServiceAccountRefs{ServiceAccounts: []*commonv1.ClusterObjectRef{{
						Name: fmt.Sprintf("svc-%04d", (si+1)%s), Namespace: "default", Cluster: cluster,
					}}},
				}}},
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{
						Name: fmt.Sprintf("svc-%04d", si), Namespace: "default", Cluster: cluster,
					}}},
				}}},
				AllowedMethods: []string{"GET"},
				AllowedPorts:   []uint32{9080},
			},
		})
	}
	inputs[first].VirtualMeshes = append(inputs[first].VirtualMeshes, vm)
	for _, in := range inputs {
		snapshots.SealInput(in)
	}
	return inputs
}

func BenchmarkTranslate(b *testing.B) {
	for _, e := range []struct{ c, s, p int }{{10, 100, 100}, {10, 1000, 1000}} {
		b.Run(fmt.Sprintf("C=%d/S=%d/P=%d", e.c, e.s, e.p), func(b *testing.B) {
			inputs := referenceEstate(e.c, e.s, e.p)
			b.ReportAllocs()
			var objects int
			for b.Loop() {
				out, err := domain.Translate(inputs, domain.Options{})
				if err != nil {
					b.Fatal(err)
				}
				objects = 0
				for _, o := range out {
					objects += len(o.GetObjects())
				}
			}
			b.ReportMetric(float64(objects), "objects")
		})
	}
}

// BenchmarkTranslateFederated is DESIGN.md §8's second estate: every
// service federated to every mesh.
func BenchmarkTranslateFederated(b *testing.B) {
	permissive := &networkingv1.VirtualMeshSpec_Federation{Mode: &networkingv1.VirtualMeshSpec_Federation_Permissive_{Permissive: &networkingv1.VirtualMeshSpec_Federation_Permissive{}}}
	for _, e := range []struct{ c, s, p int }{{10, 1000, 1000}} {
		b.Run(fmt.Sprintf("C=%d/S=%d/P=%d", e.c, e.s, e.p), func(b *testing.B) {
			inputs := federatedEstate(e.c, e.s, e.p, permissive)
			b.ReportAllocs()
			var objects int
			for b.Loop() {
				out, err := domain.Translate(inputs, domain.Options{})
				if err != nil {
					b.Fatal(err)
				}
				objects = 0
				for _, o := range out {
					objects += len(o.GetObjects())
				}
			}
			b.ReportMetric(float64(objects), "objects")
		})
	}
}

// selectiveExport is selective federation of the services labelled
// export=true (a tenth of them in the reference estate) to every mesh.
var selectiveExport = &networkingv1.VirtualMeshSpec_Federation{Mode: &networkingv1.VirtualMeshSpec_Federation_Selective_{Selective: &networkingv1.VirtualMeshSpec_Federation_Selective{
	Selectors: []*networkingv1.VirtualMeshSpec_Federation_Selective_Selector{{
		DestinationSelectors: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceMatcher_{
			KubeServiceMatcher: &networkingv1.DestinationSelector_KubeServiceMatcher{Labels: map[string]string{"export": "true"}},
		}}},
	}},
}}}

// BenchmarkTranslateReference100 is DESIGN.md §8's first target: a full
// translation of 100 clusters x 1,000 services with 10,000 TrafficPolicies
// and 5,000 AccessPolicies, a tenth of the services federated to every
// other mesh (about two million output objects). Run it on one core:
//
//	go test -run '^$' -bench TranslateReference100 -cpu 1 -benchmem -count 5 .
//
// Besides time and allocations it reports the peak memory seen while
// translating: peak-heap-B is the largest heap (live and not yet collected
// objects) and peak-mapped-B the largest memory the Go runtime held from
// the OS (heap and stacks, less what it returned), sampled every few
// milliseconds from runtime/metrics; the estate's inputs are included.
// VmHWM-B is the process's peak resident set so far, from /proc.
func BenchmarkTranslateReference100(b *testing.B) {
	const c, s, p = 100, 1000, 10000
	b.Run(fmt.Sprintf("C=%d/S=%d/P=%d", c, s, p), func(b *testing.B) {
		inputs := federatedEstate(c, s, p, selectiveExport)
		runtime.GC()
		b.ReportAllocs()
		var objects int
		peak := startPeakSampler()
		for b.Loop() {
			out, err := domain.Translate(inputs, domain.Options{})
			if err != nil {
				b.Fatal(err)
			}
			objects = 0
			for _, o := range out {
				objects += len(o.GetObjects())
			}
		}
		heap, mapped := peak()
		b.ReportMetric(float64(objects), "objects")
		b.ReportMetric(float64(heap), "peak-heap-B")
		b.ReportMetric(float64(mapped), "peak-mapped-B")
		if hwm := vmHWM(); hwm > 0 {
			b.ReportMetric(float64(hwm), "VmHWM-B")
		}
	})
}

// startPeakSampler samples the runtime's memory every 2 ms until the
// returned function is called, which returns the largest heap and mapped
// sizes seen.
func startPeakSampler() func() (heap, mapped uint64) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	var maxHeap, maxMapped uint64
	read := func() {
		metrics.Read(samples)
		maxHeap = max(maxHeap, samples[0].Value.Uint64())
		maxMapped = max(maxMapped, samples[1].Value.Uint64()-samples[2].Value.Uint64())
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() (uint64, uint64) {
		close(stop)
		<-done
		read()
		return maxHeap, maxMapped
	}
}

// vmHWM is the process's peak resident set size in bytes, or 0 where
// /proc does not say.
func vmHWM() uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// TestReferenceEstate checks the benchmark's estate translates as meant:
// every policy accepted, one VirtualService per policy, one
// AuthorizationPolicy per access policy plus the deny-by-default and the
// east-west gateway allow policy per cluster, one PeerAuthentication per
// cluster.
func TestReferenceEstate(t *testing.T) {
	out, err := domain.Translate(referenceEstate(3, 10, 12), domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range out {
		for _, obj := range o.GetObjects() {
			kinds[obj.GetKind()]++
		}
		for _, st := range o.GetStatuses() {
			if got := string(st.GetStatus()); !strings.Contains(got, `"state":"ACCEPTED"`) || strings.Contains(got, "INVALID") {
				t.Errorf("%s: %s", st.GetName(), got)
			}
		}
	}
	want := map[string]int{"VirtualService": 12, "DestinationRule": 30, "AuthorizationPolicy": 6 + 2*3, "PeerAuthentication": 3}
	if !maps.Equal(kinds, want) {
		t.Fatalf("objects by kind: %v, want %v", kinds, want)
	}
}

// BenchmarkIncrementalEdit measures one policy edit on the reference
// estate, from new inputs to new output versions, with Incremental: the
// estate is translated in full once, then each iteration applies the other
// of two versions of one TrafficPolicy (3 or 4 retries) or one
// AccessPolicy (GET, or GET and HEAD). Sealing the edited input (the
// agent's or ingest's work) is done before the timer starts.
func BenchmarkIncrementalEdit(b *testing.B) {
	for _, e := range []struct{ c, s, p int }{{10, 1000, 1000}, {100, 1000, 10000}} {
		b.Run(fmt.Sprintf("C=%d/S=%d/P=%d", e.c, e.s, e.p), func(b *testing.B) {
			a := referenceEstate(e.c, e.s, e.p)
			editTP := maps.Clone(a)
			first := shallowInput(a["meshplane"])
			first.TrafficPolicies = slices.Clone(first.TrafficPolicies)
			tp := proto.CloneOf(first.TrafficPolicies[0])
			tp.Metadata.Generation++
			tp.Spec.Policy.Retries.Attempts = 4
			first.TrafficPolicies[0] = tp
			snapshots.SealInput(first)
			editTP["meshplane"] = first

			editAP := maps.Clone(a)
			first = shallowInput(a["meshplane"])
			first.AccessPolicies = slices.Clone(first.AccessPolicies)
			ap := proto.CloneOf(first.AccessPolicies[0])
			ap.Metadata.Generation++
			ap.Spec.AllowedMethods = []string{"GET", "HEAD"}
			first.AccessPolicies[0] = ap
			snapshots.SealInput(first)
			editAP["meshplane"] = first

			inc := domain.NewIncremental(domain.Options{})
			r, err := inc.Translate(a, domain.LastGood{})
			if err != nil {
				b.Fatal(err)
			}
			for _, kind := range []struct {
				name   string
				edited map[string]*snapshotv1.InputSnapshot
				// decoded: every input of the changed cluster is decoded
				// afresh, as translation gets it from ingest, so that no
				// policy shares its message with the last one.
				decoded bool
				// encoded: decoded, and the policies' SourceIDs taken
				// from the encoding (snapshots.ReadPolicies, timed), as
				// translation has them for an input it decoded.
				encoded bool
			}{{"TrafficPolicy", editTP, false, false}, {"AccessPolicy", editAP, false, false}, {"TrafficPolicy/decoded", editTP, true, false}, {"TrafficPolicy/encoded", editTP, true, true}} {
				b.Run(kind.name, func(b *testing.B) {
					_, before := inc.Counts()
					b.ReportAllocs()
					var wire [2][]byte
					if kind.decoded {
						for j, in := range []map[string]*snapshotv1.InputSnapshot{kind.edited, a} {
							if wire[j], err = proto.Marshal(in["meshplane"]); err != nil {
								b.Fatal(err)
							}
						}
					}
					i := 0
					var last *domain.Result
					for b.Loop() {
						in := kind.edited
						if i%2 == 1 {
							in = a
						}
						if kind.decoded {
							b.StopTimer()
							in = maps.Clone(in)
							fresh := &snapshotv1.InputSnapshot{}
							if err := proto.Unmarshal(wire[i%2], fresh); err != nil {
								b.Fatal(err)
							}
							in["meshplane"] = fresh
							b.StartTimer()
						}
						var ids map[string]domain.SourceIDs
						if kind.encoded {
							p := snapshots.ReadPolicies(wire[i%2])
							ids = map[string]domain.SourceIDs{"meshplane": {Traffic: p.Traffic, Access: p.Access}}
						}
						i++
						last = r
						r, err = inc.TranslateWithIDs(in, ids, r.LastGood)
						if err != nil {
							b.Fatal(err)
						}
					}
					if _, n := inc.Counts(); n-before < i {
						b.Fatalf("%d of %d edits were translated incrementally", n-before, i)
					}
					// Outputs with a new version after the last edit.
					changed := 0
					for c, o := range r.Outputs {
						if last.Outputs[c].GetVersion() != o.GetVersion() {
							changed++
						}
					}
					b.ReportMetric(float64(changed), "changed-outputs")
					// Back to the original estate for the next edit kind.
					if r, err = inc.Translate(a, r.LastGood); err != nil {
						b.Fatal(err)
					}
				})
			}
		})
	}
}

// BenchmarkDeltaBytes measures what distribution sends one agent for one
// TrafficPolicy edit at the reference estate (C=100, S=1,000, P=10,000, a
// tenth of the services federated: about 20,000 objects per cluster), with
// the real translator's outputs: the whole new snapshot against the delta
// from the version the agent holds (snapshots.Diff), both as protobuf
// bytes before compression. The timed part is distribution's work per
// agent (index the new version, diff) and the agent's (apply and check the
// delta). Run it once:
//
//	go test -run '^$' -bench DeltaBytes -benchtime 3x .
func BenchmarkDeltaBytes(b *testing.B) {
	const c, s, p = 100, 1000, 10000
	a := federatedEstate(c, s, p, selectiveExport)
	edited := maps.Clone(a)
	first := shallowInput(a["meshplane"])
	first.TrafficPolicies = slices.Clone(first.TrafficPolicies)
	tp := proto.CloneOf(first.TrafficPolicies[0])
	tp.Metadata.Generation++
	tp.Spec.Policy.Retries.Attempts = 4
	first.TrafficPolicies[0] = tp
	snapshots.SealInput(first)
	edited["meshplane"] = first

	inc := domain.NewIncremental(domain.Options{})
	before, err := inc.Translate(a, domain.LastGood{})
	if err != nil {
		b.Fatal(err)
	}
	baseIdx := map[string]snapshots.OutputIndex{}
	for cl, o := range before.Outputs {
		baseIdx[cl] = snapshots.IndexOutput(o)
	}
	after, err := inc.Translate(edited, before.LastGood)
	if err != nil {
		b.Fatal(err)
	}
	// The changed output with the most objects.
	cluster := ""
	for cl, o := range after.Outputs {
		if before.Outputs[cl].GetVersion() != o.GetVersion() && (cluster == "" || len(o.GetObjects()) > len(after.Outputs[cluster].GetObjects())) {
			cluster = cl
		}
	}
	if cluster == "" {
		b.Fatal("the edit changed no output")
	}
	base, next := before.Outputs[cluster], after.Outputs[cluster]
	var delta *snapshotv1.OutputDelta
	b.ResetTimer()
	for b.Loop() {
		var err error
		delta, _, err = snapshots.Diff(base.GetVersion(), baseIdx[cluster], next)
		if err != nil {
			b.Fatal(err)
		}
		made, err := snapshots.ApplyDelta(base, delta)
		if err != nil || made.GetVersion() != next.GetVersion() {
			b.Fatalf("the delta does not make the new version: %v", err)
		}
	}
	full, d := proto.Size(next), proto.Size(delta)
	b.ReportMetric(float64(len(next.GetObjects())), "objects")
	b.ReportMetric(float64(full), "whole-B")
	b.ReportMetric(float64(d), "delta-B")
	b.ReportMetric(float64(full)/float64(d), "whole/delta")
}

// BenchmarkEncodeReferenceOutput encodes one cluster's output of the
// reference estate (C=100, S=1,000, P=10,000, a tenth of the services
// federated: about 21,000 objects; TestWriteReferenceOutput's) as
// translation publishes it (snapshots.EncodeOutput), with the maps and
// specs the real translator shares between objects.
//
//	go test -run '^$' -bench EncodeReferenceOutput .
func BenchmarkEncodeReferenceOutput(b *testing.B) {
	a := federatedEstate(100, 1000, 10000, selectiveExport)
	out, err := domain.Translate(a, domain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	o := out["cluster-000"]
	runtime.GC()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		data, err := snapshots.EncodeOutput(o)
		if err != nil {
			b.Fatal(err)
		}
		n = len(data)
	}
	b.ReportMetric(float64(len(o.GetObjects())), "objects")
	b.ReportMetric(float64(n), "bytes")
}
