package domain

import "testing"

// TestIstiodVersionAndName: istiod's version comes from the discovery
// container, else the only container; the legacy istio-pilot Deployment
// is a control plane too (issue 16 item 6).
func TestIstiodVersionAndName(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dep        string
		labels     map[string]string
		containers []Container
		wantMesh   string
		wantVer    string
	}{
		{"discovery container", "istiod", map[string]string{"app": "istiod"},
			[]Container{{Name: "discovery", Image: "docker.io/istio/pilot:1.24.2"}, {Name: "other", Image: "x:9"}}, "istiod-istio-system-east", "1.24.2"},
		{"one renamed container", "istiod", map[string]string{"app": "istiod"},
			[]Container{{Name: "pilot", Image: "registry.example:5000/istio/pilot:1.23.1-distroless"}, {Name: "init", Image: "i:1", Init: true}}, "istiod-istio-system-east", "1.23.1"},
		{"several containers, none named discovery", "istiod", map[string]string{"app": "istiod"},
			[]Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:2"}}, "istiod-istio-system-east", ""},
		{"legacy istio-pilot", "istio-pilot", map[string]string{"app": "pilot", "istio": "pilot"},
			[]Container{{Name: "discovery", Image: "docker.io/istio/pilot:1.4.10"}, {Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.4.10"}}, "istio-pilot-istio-system-east", "1.4.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Discovered{Deployments: []Deployment{{
				Name: tc.dep, Namespace: "istio-system", PodLabels: tc.labels, ServiceAccount: "istiod",
				DiscoveryImage: IstiodImage(tc.containers),
			}}}
			s := BuildInputSnapshot(east, d)
			if len(s.GetMeshes()) != 1 {
				t.Fatalf("meshes %v, want one", s.GetMeshes())
			}
			m := s.GetMeshes()[0]
			if m.GetMetadata().GetName() != tc.wantMesh || m.GetSpec().GetIstio().GetInstallation().GetVersion() != tc.wantVer {
				t.Errorf("mesh %s version %q, want %s version %q", m.GetMetadata().GetName(), m.GetSpec().GetIstio().GetInstallation().GetVersion(), tc.wantMesh, tc.wantVer)
			}
		})
	}
}

// TestPodIstiodImage: a pod is istiod's by its discovery container, or by
// its labels and only container; any other single-container pod is not.
func TestPodIstiodImage(t *testing.T) {
	one := []Container{{Name: "pilot", Image: "pilot:1.24.0"}}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		cs     []Container
		want   string
	}{
		{"discovery container", nil, []Container{{Name: "discovery", Image: "pilot:1.24.0"}}, "pilot:1.24.0"},
		{"istiod's labels, one container", map[string]string{"app": "istiod"}, one, "pilot:1.24.0"},
		{"legacy pilot's labels, one container", map[string]string{"app": "pilot"}, one, "pilot:1.24.0"},
		{"an application pod", map[string]string{"app": "reviews"}, one, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodIstiodImage(tc.labels, tc.cs); got != tc.want {
				t.Errorf("PodIstiodImage = %q, want %q", got, tc.want)
			}
		})
	}
}
