package render_test

import (
	"strings"
	"testing"

	"github.com/meshplane/meshplane/services/translation/render"
)

// TestLoadWasmAndAccessLogPolicies: manifests of both kinds are read into
// the cluster's input; a bad field is named.
func TestLoadWasmAndAccessLogPolicies(t *testing.T) {
	in := &render.Inputs{}
	err := render.Load("policies.yaml", "east", []byte(`
apiVersion: networking.meshplane.dev/v1
kind: WasmDeploymentPolicy
metadata: {name: jwt, namespace: bookinfo}
spec:
  filters:
  - name: jwt
    ociImage: ghcr.io/example/jwt:1.0
---
apiVersion: observability.meshplane.dev/v1
kind: AccessLogPolicy
metadata: {name: errors, namespace: ops}
spec:
  filters:
  - statusCodeMatcher: {value: 500, comparator: GE}
`), in)
	if err != nil {
		t.Fatal(err)
	}
	s := in.Snapshots["east"]
	if len(s.GetWasmDeploymentPolicies()) != 1 || s.GetWasmDeploymentPolicies()[0].GetSpec().GetFilters()[0].GetOciImage() != "ghcr.io/example/jwt:1.0" {
		t.Fatalf("WasmDeploymentPolicies = %v", s.GetWasmDeploymentPolicies())
	}
	if len(s.GetAccessLogPolicies()) != 1 || s.GetAccessLogPolicies()[0].GetSpec().GetFilters()[0].GetStatusCodeMatcher().GetValue() != 500 {
		t.Fatalf("AccessLogPolicies = %v", s.GetAccessLogPolicies())
	}
	err = render.Load("bad.yaml", "east", []byte(`
apiVersion: observability.meshplane.dev/v1
kind: AccessLogPolicy
metadata: {name: bad, namespace: ops}
spec:
  filters:
  - statusCodeMatcher: {value: lots}
`), &render.Inputs{})
	if err == nil || !strings.Contains(err.Error(), "statusCodeMatcher") {
		t.Fatalf("a bad AccessLogPolicy: err = %v, want it to name the statusCodeMatcher field", err)
	}
}
