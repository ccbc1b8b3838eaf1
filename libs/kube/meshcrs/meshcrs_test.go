package meshcrs_test

import (
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/meshcrs"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func trafficPolicy(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.meshplane.dev/v1", "kind": "TrafficPolicy",
		"metadata": map[string]any{
			"name": "retries", "namespace": "bookinfo", "generation": int64(3), "uid": "u-1",
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"},
		},
	}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func TestDecode(t *testing.T) {
	k, ok := meshcrs.KindOf("networking.meshplane.dev/v1", "TrafficPolicy")
	if !ok || k.GVR.Resource != "trafficpolicies" {
		t.Fatalf("KindOf(TrafficPolicy) = %v, %v", k, ok)
	}
	if _, ok := meshcrs.KindOf("networking.istio.io/v1", "VirtualService"); ok {
		t.Fatal("an Istio kind is a Meshplane kind")
	}

	var r meshcrs.Resources
	if err := k.Decode(&r, trafficPolicy(map[string]any{"policy": map[string]any{"retries": map[string]any{"attempts": int64(3)}}}), "mgmt"); err != nil {
		t.Fatal(err)
	}
	s := &snapshotv1.InputSnapshot{}
	r.AddTo(s)
	if len(s.GetTrafficPolicies()) != 1 {
		t.Fatalf("decoded %d policies, want 1", len(s.GetTrafficPolicies()))
	}
	tp := s.GetTrafficPolicies()[0]
	md := tp.GetMetadata()
	if md.GetCluster() != "mgmt" || md.GetGeneration() != 3 || md.GetUid() != "u-1" || tp.GetSpec().GetPolicy().GetRetries().GetAttempts() != 3 {
		t.Fatalf("decoded %v", tp)
	}
	if _, ok := md.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok || md.GetAnnotations()["team"] != "a" {
		t.Fatalf("annotations = %v, want team kept and last-applied dropped", md.GetAnnotations())
	}

	// A bad field is named in the error, and the resource is added all the
	// same, with an empty spec and the error as its decode error: it must
	// not vanish from a snapshot.
	err := k.Decode(&r, trafficPolicy(map[string]any{"policy": map[string]any{"requestTimeout": "soon"}}), "mgmt")
	if err == nil || !strings.Contains(err.Error(), "spec.policy.requestTimeout") {
		t.Fatalf("bad duration: err = %v, want it to name spec.policy.requestTimeout", err)
	}
	if len(r.TrafficPolicies) != 2 {
		t.Fatalf("decoded %d policies, want the one that does not decode added too", len(r.TrafficPolicies))
	}
	bad := r.TrafficPolicies[1]
	if de := bad.GetMetadata().GetDecodeError(); !strings.HasPrefix(de, "spec.policy.requestTimeout: does not decode") {
		t.Errorf("decode error = %q, want it to start with the field", de)
	}
	if bad.GetMetadata().GetGeneration() != 3 || bad.GetSpec() == nil || bad.GetSpec().GetPolicy() != nil {
		t.Errorf("undecoded resource = %v, want its metadata and an empty spec", bad)
	}
	if r.TrafficPolicies[0].GetMetadata().GetDecodeError() != "" {
		t.Errorf("a resource that decoded has a decode error")
	}
}

func TestDecodeWasmAndAccessLogPolicies(t *testing.T) {
	wasm, ok := meshcrs.KindOf("networking.meshplane.dev/v1", "WasmDeploymentPolicy")
	if !ok || wasm.GVR.Resource != "wasmdeploymentpolicies" {
		t.Fatalf("KindOf(WasmDeploymentPolicy) = %v, %v", wasm, ok)
	}
	logs, ok := meshcrs.KindOf("observability.meshplane.dev/v1", "AccessLogPolicy")
	if !ok || logs.GVR.Resource != "accesslogpolicies" {
		t.Fatalf("KindOf(AccessLogPolicy) = %v, %v", logs, ok)
	}
	obj := func(apiVersion, kind string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "p", "namespace": "bookinfo", "generation": int64(2)},
			"spec":     spec,
		}}
	}
	var r meshcrs.Resources
	err := wasm.Decode(&r, obj("networking.meshplane.dev/v1", "WasmDeploymentPolicy", map[string]any{
		"filters": []any{map[string]any{
			"name": "auth", "http": map[string]any{"url": "https://example.com/f.wasm", "sha256": "ab"},
			"rootId": "root", "config": map[string]any{"k": "v"}, "phase": "AUTHN", "priority": int64(5),
		}},
	}), "c1")
	if err != nil {
		t.Fatal(err)
	}
	err = logs.Decode(&r, obj("observability.meshplane.dev/v1", "AccessLogPolicy", map[string]any{
		"filters":                []any{map[string]any{"statusCodeMatcher": map[string]any{"value": int64(500), "comparator": "GE"}}},
		"includedRequestHeaders": []any{"x-request-id"},
	}), "c1")
	if err != nil {
		t.Fatal(err)
	}
	s := &snapshotv1.InputSnapshot{}
	r.AddTo(s)
	if len(s.GetWasmDeploymentPolicies()) != 1 || len(s.GetAccessLogPolicies()) != 1 {
		t.Fatalf("decoded %d Wasm and %d access-log policies, want 1 and 1", len(s.GetWasmDeploymentPolicies()), len(s.GetAccessLogPolicies()))
	}
	f := s.GetWasmDeploymentPolicies()[0].GetSpec().GetFilters()[0]
	if f.GetHttp().GetUrl() != "https://example.com/f.wasm" || f.GetPriority() != 5 || f.GetConfig().GetFields()["k"].GetStringValue() != "v" {
		t.Fatalf("decoded filter %v", f)
	}
	al := s.GetAccessLogPolicies()[0]
	if al.GetMetadata().GetCluster() != "c1" || al.GetSpec().GetFilters()[0].GetStatusCodeMatcher().GetValue() != 500 {
		t.Fatalf("decoded access-log policy %v", al)
	}

	err = logs.Decode(&r, obj("observability.meshplane.dev/v1", "AccessLogPolicy", map[string]any{
		"filters": []any{map[string]any{"statusCodeMatcher": map[string]any{"value": "many"}}},
	}), "c1")
	if err == nil || !strings.Contains(err.Error(), "spec.filters[0].statusCodeMatcher.value") {
		t.Fatalf("bad status code: err = %v, want it to name spec.filters[0].statusCodeMatcher.value", err)
	}
}
