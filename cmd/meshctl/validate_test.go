package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

// cachedValidator is meshplane-istio-validate as hack/tools.sh caches it
// (from tools/istiovalidate, which meshctl's module cannot import).
func cachedValidator(t *testing.T) string {
	t.Helper()
	p := filepath.Join(kubetest.ToolsDir(), validatorName)
	if !isExecutableFile(p) {
		t.Fatalf("%s is missing: run `make tools` (hack/tools.sh) to build and cache it", p)
	}
	return p
}

const goldenInputs = "../../services/translation/testdata/golden"

var validatedSummary = regexp.MustCompile(`meshplane-istio-validate: (\d+) Istio object\(s\) validated with istio.io/istio v\S+: (\d+) rejected, (\d+) warning\(s\)`)

// TestRenderValidate renders translation golden inputs and runs Istio's
// validation, with the real validator, on what it prints: every object
// reaches it, and Istio accepts them all.
func TestRenderValidate(t *testing.T) {
	validator := cachedValidator(t)
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		// The TrafficPolicy at the edges of what Istio takes, and the
		// policies Istio would refuse, which translation holds back.
		{"istio-validation", nil},
		// Federation: Gateways, ServiceEntries, DestinationRules and
		// VirtualServices for federated hosts, in two clusters.
		{"federation-route-policies", nil},
		{"federation-route-policies", []string{"--cluster", "east", "-o", "json"}},
	} {
		t.Run(tc.golden+strings.Join(tc.args, ""), func(t *testing.T) {
			args := append([]string{"render", "-f", filepath.Join(goldenInputs, tc.golden, "input.yaml"), "--validate", "--validator", validator}, tc.args...)
			out, errOut, code := meshctlOffline(t, args...)
			if code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, errOut)
			}
			m := validatedSummary.FindStringSubmatch(errOut)
			if m == nil {
				t.Fatalf("no summary of the validator in stderr:\n%s", errOut)
			}
			// Every object printed was validated.
			if got, printed := m[1], strconv.Itoa(printedObjects(t, out)); got != printed || printed == "0" || m[2] != "0" || m[3] != "0" {
				t.Errorf("validated %s object(s), %s rejected, %s warning(s); printed %s:\n%s", got, m[2], m[3], printed, errOut)
			}
		})
	}
}

// printedObjects counts the objects of render's output, YAML or JSON.
func printedObjects(t *testing.T, out string) int {
	t.Helper()
	n := 0
	if strings.HasPrefix(out, "[") {
		var list []renderedCluster
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			n += len(c.Objects)
		}
		return n
	}
	for _, m := range regexp.MustCompile(`(?m)^# (\d+) object\(s\), output version`).FindAllStringSubmatch(out, -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// TestRenderValidateRejects: discovered objects are trusted, so a Service
// port name that Kubernetes itself would refuse goes into the ServiceEntry
// of a federated service; Istio's validation names the object and the
// rule, and render exits 1, with the YAML still printed.
func TestRenderValidateRejects(t *testing.T) {
	validator := cachedValidator(t)
	raw, err := os.ReadFile(filepath.Join(goldenInputs, "federation-permissive", "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(string(raw), "        - port: 9080\n          name: http\n", "        - port: 9080\n          name: HTTP_1\n", 1)
	if in == string(raw) {
		t.Fatal("the golden input has no port to rename")
	}
	path := filepath.Join(t.TempDir(), "input.yaml")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := meshctlOffline(t, "render", "-f", path, "--validate", "--validator", validator)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "name: HTTP_1") {
		t.Errorf("the rendered YAML is not printed:\n%s", out)
	}
	want := regexp.MustCompile(`(?m)^Error: ServiceEntry \S+ in cluster east: istiod validation webhook: configuration is invalid: invalid port name: HTTP_1$`)
	if !want.MatchString(errOut) {
		t.Errorf("stderr does not name the ServiceEntry and Istio's rule:\n%s", errOut)
	}
}

// TestRenderValidateFindsValidator: --validate looks for the validator
// beside meshctl, then on PATH, and says how to build it when it is in
// neither; a validator that fails is an error, not a verdict.
func TestRenderValidateFindsValidator(t *testing.T) {
	input := filepath.Join(goldenInputs, "istio-validation", "input.yaml")
	t.Setenv("PATH", t.TempDir())
	_, errOut, code := meshctlOffline(t, "render", "-f", input, "--validate")
	if code != exitUsage || !strings.Contains(errOut, "--validate needs meshplane-istio-validate, which is neither beside meshctl") ||
		!strings.Contains(errOut, "make istio-validate") || !strings.Contains(errOut, "--validator PATH") {
		t.Errorf("without a validator: exit %d, stderr:\n%s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--validate", "--validator", "/nonexistent/validator"}, "--validator /nonexistent/validator: not an executable file"},
		{[]string{"--validator", "/bin/true"}, "--validator is for --validate"},
	} {
		_, errOut, code := meshctlOffline(t, append([]string{"render", "-f", input}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s", tc.args, code, errOut)
		}
	}

	// On PATH: the real validator, linked into a directory on PATH.
	dir := t.TempDir()
	if err := os.Symlink(cachedValidator(t), filepath.Join(dir, validatorName)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if _, errOut, code := meshctlOffline(t, "render", "-f", input, "--validate"); code != 0 || !validatedSummary.MatchString(errOut) {
		t.Errorf("validator on PATH: exit %d, stderr:\n%s", code, errOut)
	}

	// A validator that cannot do its job (exit 2: unreadable input).
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'cannot read' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := meshctlOffline(t, "render", "-f", input, "--validate", "--validator", broken); code != exitFailure || !strings.Contains(errOut, broken+": exit status 2\ncannot read") {
		t.Errorf("broken validator: exit %d, stderr:\n%s", code, errOut)
	}
}
