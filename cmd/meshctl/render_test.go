package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata from the current output")

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update to accept it, then review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestRenderGolden renders directories and files of resources offline and
// compares stdout and stderr with the committed outputs.
func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		// Manifests in cluster subdirectories and by annotation, with an
		// invalid policy and a skipped ConfigMap.
		{"bookinfo", []string{"-f", "testdata/render/bookinfo", "--show-status"}, 0},
		{"bookinfo-east", []string{"-f", "testdata/render/bookinfo", "--cluster", "east"}, 0},
		{"bookinfo-strict", []string{"-f", "testdata/render/bookinfo", "--cluster", "west", "--strict"}, 1},
		// Plain Kubernetes manifests per cluster (istiod, its mesh config,
		// a gateway, application Deployments and Services), discovered by
		// the agent's own code, then translated (issue 16 item 4).
		{"manifests", []string{"-f", "testdata/render/manifests", "--show-status"}, 0},
		// A user's VirtualService in cluster east, read as the agent reads
		// it (userIstioObjects), conflicts with a TrafficPolicy (issue 16
		// item 14).
		{"user-istio", []string{"-f", "testdata/render/manifests", "-f", "testdata/render/user-istio", "--cluster", "east"}, 0},
		// West's east-west gateway is found only with the labels and TLS
		// port name that the Settings give west (issue 16 item 5).
		{"gateway-detectors", []string{"-f", "testdata/render/gateway-detectors", "-f", "testdata/render/gateway-detectors-settings", "--show-status"}, 0},
		// A translation golden input, as it is.
		{"golden-invalid-policy", []string{"-f", "../../services/translation/testdata/golden/invalid-policy/input.yaml"}, 0},
		// WasmPlugins, and the statuses of WasmDeploymentPolicies.
		{"golden-wasm-deployment", []string{"-f", "../../services/translation/testdata/golden/wasm-deployment/input.yaml", "--show-status"}, 0},
		// A federating VirtualMesh: its status holds a list of
		// destinations, and its per-mesh warnings go to stderr.
		{"golden-federation-selective", []string{"-f", "../../services/translation/testdata/golden/federation-selective/input.yaml", "--show-status"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := meshctlOffline(t, append([]string{"render"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			golden(t, "render/"+tc.name+".yaml", out)
			golden(t, "render/"+tc.name+".stderr", errOut)
		})
	}
}

func TestRenderJSON(t *testing.T) {
	out, errOut, code := meshctlOffline(t, "render", "-f", "testdata/render/bookinfo", "-o", "json", "--show-status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []struct {
		Cluster string `json:"cluster"`
		Objects []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"objects"`
		Statuses []struct {
			Name   string   `json:"name"`
			State  string   `json:"state"`
			Errors []string `json:"errors"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(got) != 3 || got[0].Cluster != "east" || len(got[0].Objects) != 3 || got[1].Cluster != "meshplane" {
		t.Fatalf("-o json = %+v", got)
	}
	invalid := 0
	for _, s := range got[1].Statuses {
		if s.State == "INVALID" && len(s.Errors) > 0 {
			invalid++
		}
	}
	if invalid != 1 {
		t.Errorf("management cluster statuses = %+v, want one INVALID with errors", got[1].Statuses)
	}
}

// TestRenderStdin: -f - reads standard input, here an input snapshot as
// `snapshot dump --input` prints it.
func TestRenderStdin(t *testing.T) {
	in := "cluster: east\ndestinations:\n- metadata: {name: reviews-default-east, namespace: default, cluster: east}\n  spec: {kubeService: {ref: {name: reviews, namespace: default, cluster: east}}}\n"
	var out, errb bytes.Buffer
	root := newRootCmd(&out, &errb)
	root.SetIn(strings.NewReader(in))
	root.SetArgs([]string{"render", "-f", "-"})
	if err := root.Execute(); err != nil {
		t.Fatalf("render -f -: %v: %s", err, errb.String())
	}
	if !strings.Contains(out.String(), "# cluster: east") || !strings.Contains(out.String(), "host: reviews.default.svc.cluster.local") {
		t.Errorf("render -f - =\n%s", out.String())
	}
}

// TestRenderOutputDir: --output-dir writes one file per cluster, each the
// same as that cluster's part of the standard output.
func TestRenderOutputDir(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := meshctlOffline(t, "render", "-f", "testdata/render/bookinfo", "--output-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, c := range []string{"east", "meshplane", "west"} {
		if !strings.Contains(out, filepath.Join(dir, c+".yaml")) {
			t.Errorf("stdout does not name %s.yaml:\n%s", c, out)
		}
	}
	east, err := os.ReadFile(filepath.Join(dir, "east.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := meshctlOffline(t, "render", "-f", "testdata/render/bookinfo", "--cluster", "east")
	if string(east) != want {
		t.Errorf("east.yaml differs from render --cluster east:\n%s\n---\n%s", east, want)
	}
}

func TestRenderErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "east", "bad.yaml")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("apiVersion: networking.meshplane.dev/v1\nkind: TrafficPolicy\nmetadata: {name: p}\nspec: {policy: {retries: {attempts: many}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"render"}, 2, []string{"-f DIR"}},
		{[]string{"render", "-f", filepath.Join(dir, "nope")}, 2, []string{"no such file"}},
		{[]string{"render", "-f", dir}, 1, []string{bad, "TrafficPolicy p", "field spec.policy.retries.attempts"}},
		{[]string{"render", "-f", "testdata/render/bookinfo", "--cluster", "north"}, 2, []string{"--cluster north", "east, meshplane, west"}},
		{[]string{"render", "-f", "testdata/render/bookinfo", "-o", "table"}, 2, []string{"-o must be yaml or json"}},
	} {
		_, errOut, code := meshctlOffline(t, tc.args...)
		if code != tc.code {
			t.Errorf("meshctl %q: exit %d, want %d: %s", tc.args, code, tc.code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("meshctl %q: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
	}
}

// TestRenderGatewayDetectors renders west's gateway, labelled and named as
// Istio's defaults do not, without and with Settings that give west its
// own gateway detector: east reaches west's federated ratings through the
// gateway's address only with them, as agents discover again with the
// detector that their output snapshot brings.
func TestRenderGatewayDetectors(t *testing.T) {
	const address = "198.51.100.20"
	out, errOut, code := meshctlOffline(t, "render", "-f", "testdata/render/gateway-detectors", "--cluster", "east")
	if code != 0 {
		t.Fatalf("without Settings: exit %d; stderr:\n%s", code, errOut)
	}
	if strings.Contains(out, address) {
		t.Fatalf("without Settings, east reaches west's gateway at %s, which Istio's default labels do not select:\n%s", address, out)
	}
	out, errOut, code = meshctlOffline(t, "render", "-f", "testdata/render/gateway-detectors", "-f", "testdata/render/gateway-detectors-settings", "--cluster", "east")
	if code != 0 {
		t.Fatalf("with Settings: exit %d; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "address: "+address) || !strings.Contains(out, "http: 15443") {
		t.Fatalf("with Settings, east's ServiceEntry for west's ratings does not reach west's gateway at %s on the port named mtls (15443):\n%s", address, out)
	}
}
