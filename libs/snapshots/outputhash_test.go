package snapshots

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestFastOutputVersion checks that the hand encoding hashes the same bytes
// as protobuf's deterministic encoding of the snapshot with body digests
// (ReflectOutputVersion), over random outputs with empty,
// long and non-ASCII strings, maps with empty keys and values, and every
// list of the snapshot.
func TestFastOutputVersion(t *testing.T) {
	if !fastOutputOK {
		t.Fatal("OutputSnapshot, Object or ResourceStatus has fields the hand encoding does not know: update outputhash.go (outputFields, objectFields, statusFields and the encoders)")
	}
	if !objectUnknown.ok {
		t.Fatal("Object keeps its unknown fields elsewhere than unknownFields: update objectUnknown in outputhash.go")
	}
	r := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		switch r.IntN(6) {
		case 0:
			return ""
		case 1:
			return "é✓" + strings.Repeat("x", r.IntN(300))
		case 2:
			return strings.Repeat("long-", 40+r.IntN(40))
		default:
			return fmt.Sprintf("s%d", r.IntN(1000))
		}
	}
	strMap := func() map[string]string {
		if r.IntN(4) == 0 {
			return nil
		}
		m := map[string]string{}
		for range r.IntN(6) {
			m[str()] = str()
		}
		return m
	}
	bytes := func() []byte {
		if r.IntN(4) == 0 {
			return nil
		}
		return []byte(strings.Repeat(`{"a":1}`, r.IntN(200)))
	}
	for i := range 500 {
		out := &snapshotv1.OutputSnapshot{Cluster: str(), Version: str(), GeneratedAt: timestamppb.Now(), InputVersions: strMap()}
		for range r.IntN(20) {
			o := &snapshotv1.Object{ApiVersion: str(), Kind: str(), Namespace: str(), Name: str(), Labels: strMap(), Annotations: strMap(), Spec: bytes()}
			if n := len(out.Objects); n > 0 && r.IntN(2) == 0 {
				// Objects share label maps, as translation's do.
				o.Labels = out.Objects[n-1].Labels
			}
			out.Objects = append(out.Objects, o)
		}
		for range r.IntN(10) {
			out.Statuses = append(out.Statuses, &snapshotv1.ResourceStatus{ApiVersion: str(), Kind: str(), Namespace: str(), Name: str(), ObservedGeneration: r.Int64N(1<<40) - 1<<39, Status: bytes()})
		}
		for range r.IntN(3) {
			out.IssuedCertificates = append(out.IssuedCertificates, &snapshotv1.IssuedCertificate{Mesh: &commonv1.ObjectRef{Name: str(), Namespace: str()}, SecretName: str(), SecretNamespace: str()})
		}
		for range r.IntN(3) {
			out.WasmFilters = append(out.WasmFilters, &snapshotv1.WasmFilterConfig{Name: str(), Url: str(), ConfigJson: bytes(), Priority: r.Int32N(10)})
		}
		for range r.IntN(3) {
			out.AccessLogPolicies = append(out.AccessLogPolicies, &snapshotv1.AccessLogPolicyConfig{
				Policy:                 &commonv1.ObjectRef{Name: str()},
				WorkloadMatches:        []*snapshotv1.AccessLogPolicyConfig_WorkloadMatch{{Namespace: str(), Labels: strMap()}},
				IncludedRequestHeaders: []string{str(), str()},
			})
		}
		for range r.IntN(3) {
			out.MissingClusters = append(out.MissingClusters, str())
		}
		if r.IntN(2) == 0 {
			out.GatewayDetector = &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
				IngressGatewayLabels: strMap(), EastWestGatewayLabels: strMap(), EastWestGatewayTlsPortName: str(),
			}
		}
		fast, ok := fastOutputVersion(out, &outputCache{}, false)
		if !ok {
			t.Fatalf("output %d: the fast path refused a valid output", i)
		}
		if want := ReflectOutputVersion(out); fast != want {
			t.Fatalf("output %d: fast version %s, reflective %s", i, fast, want)
		}
	}
}

// TestFastOutputVersionFallsBack checks that what the hand encoding does not
// cover goes the reflective way, which gives the same result as before.
func TestFastOutputVersionFallsBack(t *testing.T) {
	cases := map[string]*snapshotv1.OutputSnapshot{
		"invalid UTF-8 name":       {Cluster: "c", Objects: []*snapshotv1.Object{{Name: "\xff"}}},
		"invalid UTF-8 label":      {Cluster: "c", Objects: []*snapshotv1.Object{{Name: "a", Labels: map[string]string{"k": "\xfe"}}}},
		"invalid UTF-8 annotation": {Cluster: "c", Objects: []*snapshotv1.Object{{Name: "a", Annotations: map[string]string{"\xfe": "v"}}}},
		"nil object":               {Cluster: "c", Objects: []*snapshotv1.Object{nil}},
		"nil status":               {Cluster: "c", Statuses: []*snapshotv1.ResourceStatus{nil}},
		"invalid UTF-8 missing":    {Cluster: "c", MissingClusters: []string{"\xff"}},
	}
	for name, out := range cases {
		if _, ok := fastOutputVersion(out, &outputCache{}, false); ok {
			t.Errorf("%s: the fast path took it", name)
		}
		if got, want := OutputVersion(out), ReflectOutputVersion(out); got != want {
			t.Errorf("%s: OutputVersion %s, reflective %s", name, got, want)
		}
	}
	withUnknown := &snapshotv1.Object{Name: "a"}
	withUnknown.ProtoReflect().SetUnknown([]byte{0x78, 0x01}) // field 15, varint 1
	out := &snapshotv1.OutputSnapshot{Cluster: "c", Objects: []*snapshotv1.Object{withUnknown}}
	if _, ok := fastOutputVersion(out, &outputCache{}, false); ok {
		t.Error("an object with unknown fields took the fast path")
	}
	if got, want := OutputVersion(out), ReflectOutputVersion(out); got != want {
		t.Errorf("unknown fields: OutputVersion %s, reflective %s", got, want)
	}
}

// TestOutputSealer checks that the encodings and digests an OutputSealer
// keeps from one output to the next give each output the version of
// protobuf's own encoding, over outputs that share label and annotation
// maps (among them, one map as labels of some objects and annotations of
// others) and specs, have maps with invalid UTF-8, and come in any order.
func TestOutputSealer(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var shared []map[string]string
	for i := range 40 {
		m := map[string]string{}
		for j := range r.IntN(4) {
			m[fmt.Sprintf("k%d", j)] = strings.Repeat("v", r.IntN(200)) + fmt.Sprint(i)
		}
		if i%13 == 0 {
			m["bad"] = "\xff"
		}
		shared = append(shared, m)
	}
	pick := func() map[string]string { return shared[r.IntN(len(shared))] }
	// Specs are shared too, among them slices of one array that start at
	// the same byte and differ in length.
	specArray := []byte(`{"a":1}{"b":2}`)
	specs := [][]byte{nil, {}, specArray[:7], specArray, []byte(`{"a":1}`), []byte(strings.Repeat(`{"c":3}`, 100))}
	pickSpec := func() []byte { return specs[r.IntN(len(specs))] }
	// Outputs mostly follow one order of annotation maps, with maps left
	// out, added and replaced, as the outputs of a translation do.
	var order []map[string]string
	for range 60 {
		order = append(order, pick())
	}
	var z OutputSealer
	for i := range 300 {
		out := &snapshotv1.OutputSnapshot{Cluster: fmt.Sprintf("c%d", i)}
		labels := pick()
		var anns []map[string]string
		if i%3 == 0 {
			for range r.IntN(30) {
				anns = append(anns, pick())
			}
		} else {
			for _, m := range order {
				switch r.IntN(10) {
				case 0: // left out
				case 1:
					anns = append(anns, pick(), m)
				case 2:
					anns = append(anns, pick())
				default:
					anns = append(anns, m)
				}
			}
		}
		for j, ann := range anns {
			o := &snapshotv1.Object{ApiVersion: "v1", Kind: "K", Namespace: "ns", Name: fmt.Sprintf("o%d", j), Labels: labels, Annotations: ann, Spec: pickSpec()}
			if r.IntN(5) == 0 {
				o.Labels = pick()
			}
			out.Objects = append(out.Objects, o)
		}
		got := z.Seal(out)
		if want := ReflectOutputVersion(out); got != want {
			t.Fatalf("output %d: version %s, reflective %s", i, got, want)
		}
		if got != out.GetVersion() {
			t.Fatalf("output %d: Seal returned %s, set %s", i, got, out.GetVersion())
		}
	}
}

// TestOutputVersionTellsContentApart checks that outputs that differ in
// any one thing get different versions, among them those whose hashed
// bytes would be the same if the fields of a body were not framed: an
// annotation and a spec that trade bytes, and content moved between an
// object's body and its other fields.
func TestOutputVersionTellsContentApart(t *testing.T) {
	obj := func(name string, ann map[string]string, spec string) *snapshotv1.Object {
		return &snapshotv1.Object{ApiVersion: "v1", Kind: "K", Namespace: "ns", Name: name, Labels: map[string]string{"l": "1"}, Annotations: ann, Spec: []byte(spec)}
	}
	outputs := map[string]*snapshotv1.OutputSnapshot{
		"empty":                    {Cluster: "c"},
		"empty object":             {Cluster: "c", Objects: []*snapshotv1.Object{{}}},
		"no body":                  {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", nil, "")}},
		"spec":                     {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", nil, "ab")}},
		"other spec":               {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", nil, "ac")}},
		"annotation":               {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", map[string]string{"k": "ab"}, "")}},
		"annotation and spec":      {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", map[string]string{"k": "a"}, "b")}},
		"annotation and spec, cut": {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", map[string]string{"k": ""}, "ab")}},
		"empty annotation":         {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", map[string]string{"": ""}, "")}},
		"name":                     {Cluster: "c", Objects: []*snapshotv1.Object{obj("ab", nil, "")}},
		"two objects":              {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", nil, "ab"), obj("b", nil, "ab")}},
		"two objects, other spec":  {Cluster: "c", Objects: []*snapshotv1.Object{obj("a", nil, "ab"), obj("b", nil, "ac")}},
		"status":                   {Cluster: "c", Statuses: []*snapshotv1.ResourceStatus{{Name: "a", Status: []byte("ab")}}},
		"other cluster":            {Cluster: "d"},
	}
	seen := map[string]string{}
	for name, out := range outputs {
		v := OutputVersion(out)
		if want := ReflectOutputVersion(out); v != want {
			t.Errorf("%s: version %s, reflective %s", name, v, want)
		}
		if other, ok := seen[v]; ok {
			t.Errorf("%s and %s have the same version %s", name, other, v)
		}
		seen[v] = name
	}
}

// TestOutputSealerFindsKeptBodies checks that an OutputSealer finds the
// bodies it kept however they come again: in another order, so that the
// last output's order does not predict them, and after its table of
// bodies grew several times.
func TestOutputSealerFindsKeptBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type body struct {
		ann  map[string]string
		spec []byte
	}
	var bodies []body
	for i := range 5000 {
		b := body{ann: map[string]string{"a": fmt.Sprint(i)}, spec: []byte(fmt.Sprintf(`{"s":%d}`, i))}
		if i%7 == 0 {
			b.ann = nil
		}
		if i%11 == 0 {
			b.spec = nil
		}
		bodies = append(bodies, b)
	}
	var z OutputSealer
	for round := range 4 {
		out := &snapshotv1.OutputSnapshot{Cluster: "c"}
		for i, j := range r.Perm(len(bodies)) {
			if round > 0 && r.IntN(10) == 0 {
				continue
			}
			b := bodies[j]
			out.Objects = append(out.Objects, &snapshotv1.Object{ApiVersion: "v1", Kind: "K", Namespace: "ns", Name: fmt.Sprintf("o%05d", i), Annotations: b.ann, Spec: b.spec})
		}
		if got, want := z.Seal(out), ReflectOutputVersion(out); got != want {
			t.Fatalf("round %d: version %s, reflective %s", round, got, want)
		}
	}
}

// TestOutputSealerDropsReplacedBodies: a sealer kept across many
// translations that replace the objects of an output (as incremental
// translations do when policies are edited or deleted) keeps about the
// bodies of the outputs sealed last, not every body it has seen, and
// gives every output the reflective version all along.
func TestOutputSealerDropsReplacedBodies(t *testing.T) {
	const objects = 3000
	output := func(cluster string, round, n int) *snapshotv1.OutputSnapshot {
		out := &snapshotv1.OutputSnapshot{Cluster: cluster}
		for i := range n {
			out.Objects = append(out.Objects, &snapshotv1.Object{
				ApiVersion: "v1", Kind: "K", Namespace: "ns", Name: fmt.Sprintf("o%05d", i),
				Annotations: map[string]string{"parents": fmt.Sprintf("policy-%d-%d", round, i)},
				Spec:        []byte(fmt.Sprintf(`{"round":%d,"i":%d}`, round, i)),
			})
		}
		return out
	}
	var z OutputSealer
	// A second cluster's output stays as it was sealed: its bodies stay.
	west := output("west", 0, objects)
	if got, want := z.Seal(west), ReflectOutputVersion(west); got != want {
		t.Fatalf("west: version %s, reflective %s", got, want)
	}
	for round := range 20 {
		out := output("east", round+1, objects)
		if got, want := z.Seal(out), ReflectOutputVersion(out); got != want {
			t.Fatalf("round %d: version %s, reflective %s", round, got, want)
		}
	}
	if kept := z.cache.nkept; kept > 2*2*objects+minKept {
		t.Fatalf("the sealer keeps %d bodies after 20 rounds of %d objects in two outputs: it holds replaced ones", kept, objects)
	}
	// West's bodies are still found: sealing it again finds them all.
	before := z.cache.nkept
	again := output("west", 0, objects)
	for i, o := range again.Objects {
		o.Annotations, o.Spec = west.Objects[i].Annotations, west.Objects[i].Spec
	}
	if got, want := z.Seal(again), ReflectOutputVersion(again); got != want {
		t.Fatalf("west again: version %s, reflective %s", got, want)
	}
	if z.cache.nkept != before {
		t.Fatalf("sealing west again kept %d new bodies, want none: its bodies were dropped", z.cache.nkept-before)
	}
}

// BenchmarkOutputSealer seals outputs of the reference size for one
// cluster (21,000 objects, each with its own annotation map and spec, all
// with one label map): /new with a new sealer, which looks each body up,
// does not find it and keeps it; /shuffled with a sealer that keeps every
// body already, sealing the same bodies in another order than the last
// output's, so that none is predicted and each is found by key.
func BenchmarkOutputSealer(b *testing.B) {
	const n = 21000
	spec := `{"hosts":["reviews.bookinfo.svc.cluster.local"],"http":[{"route":[{"destination":{"host":"reviews.bookinfo.svc.cluster.local","subset":"v1"},"weight":90},{"destination":{"host":"reviews.bookinfo.svc.cluster.local","subset":"v2"},"weight":10}],"timeout":"10s"}]}`
	labels := map[string]string{"app.kubernetes.io/managed-by": "meshplane", "app": "reviews"}
	type body struct {
		ann  map[string]string
		spec []byte
	}
	bodies := make([]body, n)
	for i := range bodies {
		bodies[i] = body{map[string]string{"meshplane.dev/parents": fmt.Sprintf("policy-%d", i), "z": "1"}, []byte(spec)}
	}
	// output holds the bodies in the order of perm, under names in
	// order: sorting leaves it as it is.
	output := func(perm []int) *snapshotv1.OutputSnapshot {
		out := &snapshotv1.OutputSnapshot{Cluster: "cluster-000"}
		for i, j := range perm {
			out.Objects = append(out.Objects, &snapshotv1.Object{
				ApiVersion: "networking.istio.io/v1", Kind: "VirtualService", Namespace: "bookinfo", Name: fmt.Sprintf("o-%05d", i),
				Labels: labels, Annotations: bodies[j].ann, Spec: bodies[j].spec,
			})
		}
		return out
	}
	r := rand.New(rand.NewPCG(7, 8))
	inOrder := make([]int, n)
	for i := range inOrder {
		inOrder[i] = i
	}
	first := output(inOrder)
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			var z OutputSealer
			z.Seal(first)
		}
	})
	b.Run("shuffled", func(b *testing.B) {
		var z OutputSealer
		z.Seal(first)
		outs := [2]*snapshotv1.OutputSnapshot{output(r.Perm(n)), output(r.Perm(n))}
		i := 0
		for b.Loop() {
			z.Seal(outs[i%2])
			i++
		}
	})
}
