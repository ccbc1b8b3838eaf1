package domain_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden output files from the current translation")

const goldenDir = "../../testdata/golden"

// TestGolden translates each case's input.yaml (a list of input snapshots
// in protojson field names) and compares the result with output.yaml (per
// cluster: the objects with their specs decoded, and the statuses)
// semantically: both sides are decoded to generic values first, so key
// order and formatting do not matter.
func TestGolden(t *testing.T) {
	cases, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		ran++
		t.Run(c.Name(), func(t *testing.T) {
			dir := filepath.Join(goldenDir, c.Name())
			inputs := readInputs(t, filepath.Join(dir, "input.yaml"))
			out, err := domain.Translate(inputs, domain.Options{})
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			got := render(t, out)
			for cluster, o := range out {
				if err := dnsFailoverPriority(o); err != nil {
					t.Errorf("%s: %v", cluster, err)
				}
			}

			// The same inputs, with every list reversed, give the same
			// versions.
			again, err := domain.Translate(reversed(inputs), domain.Options{})
			if err != nil {
				t.Fatalf("Translate again: %v", err)
			}
			for cluster, o := range out {
				if again[cluster].GetVersion() != o.GetVersion() {
					t.Errorf("%s: version %s on the second run, %s on the first", cluster, again[cluster].GetVersion(), o.GetVersion())
				}
			}

			path := filepath.Join(dir, "output.yaml")
			if *update {
				b, err := yaml.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			var want any
			if err := yaml.Unmarshal(raw, &want); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no golden cases found")
	}
}

func readInputs(t *testing.T, path string) map[string]*snapshotv1.InputSnapshot {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := json.Unmarshal(js, &list); err != nil {
		t.Fatalf("%s: want a list of input snapshots: %v", path, err)
	}
	inputs := map[string]*snapshotv1.InputSnapshot{}
	for i, item := range list {
		in := &snapshotv1.InputSnapshot{}
		if err := protojson.Unmarshal(item, in); err != nil {
			t.Fatalf("%s: input %d: %v", path, i, err)
		}
		snapshots.SealInput(in)
		inputs[in.GetCluster()] = in
	}
	return inputs
}

// reversed copies inputs with every list in reverse order, unsealed.
func reversed(inputs map[string]*snapshotv1.InputSnapshot) map[string]*snapshotv1.InputSnapshot {
	out := map[string]*snapshotv1.InputSnapshot{}
	for c, in := range inputs {
		// Every list, so that a field added later is reversed too; the
		// elements are shared, not copied.
		r := &snapshotv1.InputSnapshot{}
		rm := r.ProtoReflect()
		in.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if !fd.IsList() {
				rm.Set(fd, v)
				return true
			}
			l := rm.NewField(fd).List()
			for i := v.List().Len() - 1; i >= 0; i-- {
				l.Append(v.List().Get(i))
			}
			rm.Set(fd, protoreflect.ValueOfList(l))
			return true
		})
		out[c] = r
	}
	return out
}

// render turns outputs into the generic shape of output.yaml.
func render(t *testing.T, outputs map[string]*snapshotv1.OutputSnapshot) any {
	t.Helper()
	doc := map[string]any{}
	for cluster, o := range outputs {
		var objects, statuses []any
		for _, obj := range o.GetObjects() {
			objects = append(objects, map[string]any{
				"apiVersion":  obj.GetApiVersion(),
				"kind":        obj.GetKind(),
				"namespace":   obj.GetNamespace(),
				"name":        obj.GetName(),
				"labels":      obj.GetLabels(),
				"annotations": obj.GetAnnotations(),
				"spec":        json.RawMessage(obj.GetSpec()),
			})
		}
		for _, s := range o.GetStatuses() {
			statuses = append(statuses, map[string]any{
				"apiVersion":         s.GetApiVersion(),
				"kind":               s.GetKind(),
				"namespace":          s.GetNamespace(),
				"name":               s.GetName(),
				"observedGeneration": s.GetObservedGeneration(),
				"status":             json.RawMessage(s.GetStatus()),
			})
		}
		entry := map[string]any{"objects": objects, "statuses": statuses}
		if ics := o.GetIssuedCertificates(); len(ics) > 0 {
			certs := make([]any, 0, len(ics))
			for _, ic := range ics {
				b, err := protojson.Marshal(ic)
				if err != nil {
					t.Fatal(err)
				}
				certs = append(certs, json.RawMessage(b))
			}
			entry["issuedCertificates"] = certs
		}
		// The Wasm filters and access-log policies appear only when not
		// empty, like issuedCertificates.
		if err := addMessages(entry, "wasmFilters", o.GetWasmFilters()); err != nil {
			t.Fatal(err)
		}
		if err := addMessages(entry, "accessLogPolicies", o.GetAccessLogPolicies()); err != nil {
			t.Fatal(err)
		}
		// The gateway detector appears only when Settings give one.
		if d := o.GetGatewayDetector(); d != nil {
			b, err := protojson.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			entry["gatewayDetector"] = json.RawMessage(b)
		}
		doc[cluster] = entry
	}
	// Through JSON, so that numbers and empty values look exactly as they
	// do when output.yaml is read.
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	return generic
}

func addMessages[M proto.Message](entry map[string]any, key string, list []M) error {
	if len(list) == 0 {
		return nil
	}
	out := make([]any, 0, len(list))
	for _, m := range list {
		b, err := protojson.Marshal(m)
		if err != nil {
			return err
		}
		out = append(out, json.RawMessage(b))
	}
	entry[key] = out
	return nil
}
