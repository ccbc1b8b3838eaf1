package tilt_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"sigs.k8s.io/yaml"
)

// helmBinary finds helm like the chart tests do: $MESHPLANE_HELM, else the
// tools cache that hack/tools.sh fills. Without it the test fails, saying
// how to get it: make test builds it (make tools).
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MESHPLANE_HELM"); p != "" {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o111 != 0 {
			return p
		}
		t.Fatalf("helm: $MESHPLANE_HELM=%s is not an executable file", p)
	}
	p := filepath.Join(kubetest.ToolsDir(), "helm")
	if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("helm not found at %s (set $MESHPLANE_HELM to override): run `make tools` or `bash hack/tools.sh` "+
			"from the repository root; it builds helm.sh/helm/v3/cmd/helm into the tools cache", p)
	}
	return p
}

type renderedObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// TestTiltfileHelmRenders renders every helm() call of the Tiltfile with
// its dev values and set= values, as Tilt would, and checks that each
// k8s_resource names a rendered workload and that every image Tilt builds
// is the image of a rendered container (so Tilt substitutes it).
func TestTiltfileHelmRenders(t *testing.T) {
	helm := helmBinary(t)
	r := execTiltfile(t, loadTiltfile(t), nil)

	workloads := map[string]bool{"meshplane-redis": true} // tilt/redis.yaml
	var images []string
	for _, c := range r.callsOf("helm") {
		chart := c.str(0, "paths")
		args := []string{"template", c.str(-1, "name"), chart, "--namespace", c.str(-1, "namespace")}
		for _, v := range c.strs(-1, "values") {
			args = append(args, "-f", v)
		}
		for _, s := range c.strs(-1, "set") {
			args = append(args, "--set", s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, helm, args...)
		cmd.Dir = r.root
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s: helm %s: %v\n%s", c.pos, strings.Join(args, " "), err, out)
			continue
		}
		for _, doc := range strings.Split(string(out), "\n---") {
			var o renderedObject
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: rendered YAML: %v", chart, err)
			}
			if o.Kind == "Deployment" || o.Kind == "StatefulSet" || o.Kind == "DaemonSet" {
				workloads[o.Metadata.Name] = true
				for _, ctr := range o.Spec.Template.Spec.Containers {
					repo, _, _ := strings.Cut(ctr.Image, ":")
					images = append(images, repo)
				}
			}
		}
	}
	for _, c := range r.callsOf("k8s_resource") {
		if w := c.str(0, "workload"); w != "" && !workloads[w] {
			t.Errorf("%s: k8s_resource(%q) names no rendered workload (rendered: %v)", c.pos, w, keys(workloads))
		}
	}
	for _, c := range dockerBuilds(r) {
		if ref := c.str(0, "ref"); !slices.Contains(images, ref) {
			t.Errorf("%s: Tilt builds %s, but no rendered container uses it (images: %v)", c.pos, ref, images)
		}
	}
}
