package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const manifests = `# cluster: east
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: default
  labels:
    meshplane.dev/cluster: east
spec:
  hosts: [reviews]
  http:
  - timeout: 1.0005s
    route:
    - destination: {host: reviews}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: eastwest, namespace: istio-system}
spec:
  selector: {istio: eastwestgateway}
  servers:
  - port: {number: 15443, name: tls, protocol: TLS}
    hosts: ["*.local"]
    tls: {mode: AUTO_PASSTHROUGH, credentialName: unused}
---
apiVersion: networking.istio.io/v1
kind: VirtualServce
metadata: {name: typo, namespace: default}
spec: {}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec: {ports: [{port: 9080}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec: {host: reviews.default.svc.cluster.local}
`

func TestRunText(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(nil, strings.NewReader(manifests), &out, &errOut)
	if code != exitRejected {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitRejected, errOut.String())
	}
	want := []string{
		"Error: VirtualService default/reviews in cluster east: istiod validation webhook: configuration is invalid: only durations to ms precision are supported",
		"Warning: Gateway istio-system/eastwest: istiod validation webhook: AUTO_PASSTHROUGH mode does not use certificates, they will be ignored",
		"Error: VirtualServce default/typo: istiod validation webhook: unrecognized type networking.istio.io/v1 VirtualServce: istiod has no schema for it",
	}
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
	if s := errOut.String(); !strings.Contains(s, "4 Istio object(s) validated with istio.io/istio ") || !strings.Contains(s, ": 2 rejected, 1 warning(s); 1 object(s) of other groups skipped") {
		t.Errorf("summary: %s", s)
	}
}

func TestRunJSONAndFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: r, namespace: default}\nspec: {host: r}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-o", "json", good, good}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, errOut.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Objects != 2 || len(rep.Findings) != 0 || !strings.HasPrefix(rep.IstioVersion, "v") {
		t.Errorf("report %+v", rep)
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"/nonexistent/x.yaml"}, "", "no such file or directory"},
		{nil, "kind: [\n", "<stdin>: document 1"},
		{[]string{"-o", "xml"}, "", "-o xml: want text or json"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, strings.NewReader(tc.stdin), &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), exitUsage, tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-version"}, nil, &out, &errOut); code != exitOK || !strings.HasPrefix(out.String(), "v0.0.0-") {
		t.Errorf("-version: exit %d, %q", code, out.String())
	}
}
