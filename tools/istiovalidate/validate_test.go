package istiovalidate_test

import (
	"strings"
	"testing"

	"github.com/meshplane/meshplane/tools/istiovalidate"
)

// badObjects are objects istiod's webhook rejects or warns on, and one
// with a field Istio does not know; the validator must say so, naming the
// object and Istio's rule.
const badObjects = `# cluster: east
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: abort-700
  namespace: default
  labels:
    meshplane.dev/cluster: east
spec:
  hosts: [reviews]
  http:
  - fault:
      abort:
        httpStatus: 700
        percentage: {value: 10}
    route:
    - destination:
        host: reviews
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: passthrough-with-credential
  namespace: istio-system
spec:
  selector: {istio: eastwestgateway}
  servers:
  - port: {number: 15443, name: tls, protocol: TLS}
    hosts: ["*.local"]
    tls: {mode: AUTO_PASSTHROUGH, credentialName: unused}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: unknown-field
  namespace: default
spec:
  host: reviews.default.svc.cluster.local
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
    retries: {attempts: 3}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: fine
  namespace: default
spec:
  host: reviews.default.svc.cluster.local
`

func TestValidatorFindings(t *testing.T) {
	v := newValidator(t)
	objs, err := istiovalidate.ReadManifests("bad.yaml", strings.NewReader(badObjects))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("read %d objects, want 4", len(objs))
	}
	got, err := v.ValidateAll(objs)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		level    istiovalidate.Level
		object   string
		rule     string
		contains string
	}{
		{istiovalidate.Error, "VirtualService default/abort-700 in cluster east", istiovalidate.RuleWebhook, "HTTP status 700 is not in range 200-599"},
		{istiovalidate.Warning, "Gateway istio-system/passthrough-with-credential", istiovalidate.RuleWebhook, "AUTO_PASSTHROUGH mode does not use certificates, they will be ignored"},
		{istiovalidate.Error, "DestinationRule default/unknown-field", istiovalidate.RuleStrictDecode, `unknown field "retries"`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d findings, want %d:\n%v", len(got), len(want), got)
	}
	for i, w := range want {
		f := got[i]
		if f.Level != w.level || f.Object.String() != w.object || f.Rule != w.rule || !strings.Contains(f.Message, w.contains) {
			t.Errorf("finding %d: got %q, want %s %s %s containing %q", i, f, w.level, w.object, w.rule, w.contains)
		}
		if !strings.HasPrefix(f.Object.Source, "bad.yaml: document ") {
			t.Errorf("finding %d: source %q does not name the document", i, f.Object.Source)
		}
	}
}

func TestReadManifests(t *testing.T) {
	in := `# a comment only
---
apiVersion: v1
kind: List
items:
- apiVersion: networking.istio.io/v1
  kind: Gateway
  metadata: {name: a, namespace: x}
  spec: {}
- apiVersion: security.istio.io/v1
  kind: PeerAuthentication
  metadata: {name: b, namespace: ns-b}
---
{"apiVersion": "networking.istio.io/v1", "kind": "Sidecar", "metadata": {"name": "c"}}
`
	objs, err := istiovalidate.ReadManifests("in", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Ref.String()+" @ "+o.Source)
	}
	want := []string{"Gateway x/a @ in: document 2, item 1", "PeerAuthentication ns-b/b @ in: document 2, item 2", "Sidecar c @ in: document 3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []struct{ in, want string }{
		{"kind: VirtualService\nmetadata: {name: x}\n", "document 1: not a Kubernetes manifest: apiVersion, kind and metadata.name are required"},
		{"- a\n- b\n", "document 1: not a Kubernetes manifest"},
		{"a: [\n", "document 1"},
	} {
		if _, err := istiovalidate.ReadManifests("in", strings.NewReader(bad.in)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got error %v, want one containing %q", bad.in, err, bad.want)
		}
	}
}
