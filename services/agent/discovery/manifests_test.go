package discovery_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/discovery"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// manifests reads testdata files into manifests, one per YAML document.
func manifests(t *testing.T, files ...string) []discovery.Manifest {
	t.Helper()
	var out []discovery.Manifest
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			if len(bytes.TrimSpace(js)) == 0 || string(js) == "null" {
				continue
			}
			out = append(out, discovery.Manifest{Where: f, JSON: js})
		}
	}
	return out
}

func discover(t *testing.T, files ...string) (*snapshotv1.InputSnapshot, []string) {
	t.Helper()
	s, skipped, err := discovery.FromManifests(discovery.Identity{Cluster: "east"}, discovery.Options{}, manifests(t, files...))
	if err != nil {
		t.Fatalf("FromManifests: %v", err)
	}
	return s, skipped
}

func workload(s *snapshotv1.InputSnapshot, name string) *discoveryv1.Workload {
	for _, w := range s.GetWorkloads() {
		if w.GetMetadata().GetName() == name {
			return w
		}
	}
	return nil
}

func destination(s *snapshotv1.InputSnapshot, name string) *discoveryv1.Destination {
	for _, d := range s.GetDestinations() {
		if d.GetMetadata().GetName() == name {
			return d
		}
	}
	return nil
}

func names[T interface{ GetMetadata() *commonv1.ObjectMeta }](in []T) []string {
	var out []string
	for _, x := range in {
		out = append(out, x.GetMetadata().GetName())
	}
	return out
}

// TestFromManifests runs the agent's discovery on manifests (issue 16
// item 4).
func TestFromManifests(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		check func(t *testing.T, s *snapshotv1.InputSnapshot, skipped []string)
	}{
		{
			name:  "istiod, its mesh config and an east-west gateway",
			files: []string{"istio.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, _ []string) {
				if len(s.GetMeshes()) != 1 {
					t.Fatalf("meshes %v, want one", s.GetMeshes())
				}
				m := s.GetMeshes()[0]
				is := m.GetSpec().GetIstio()
				if m.GetMetadata().GetName() != "istiod-istio-system-east" || is.GetTrustDomain() != "east.example" ||
					is.GetInstallation().GetVersion() != "1.24.2" || !is.GetSmartDnsProxyingEnabled() || is.GetIstiodServiceAccount() != "istiod" {
					t.Errorf("mesh %v", m)
				}
				gws := is.GetEastWestGateways()
				if len(gws) != 1 || gws[0].GetExternalAddress() != "203.0.113.10" || gws[0].GetExternalTlsPort() != 15443 || gws[0].GetTlsContainerPort() != 15443 {
					t.Errorf("east-west gateways %v, want 203.0.113.10:15443", gws)
				}
			},
		},
		{
			name:  "application manifests stand for their pods, injected by namespace label",
			files: []string{"istio.yaml", "bookinfo-app.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, skipped []string) {
				// The gateway's istio-proxy container makes it a workload,
				// as the agent finds it in a live cluster.
				if got := names(s.GetWorkloads()); !slices.Equal(got, []string{"reviews-v1-bookinfo-east", "reviews-v2-bookinfo-east", "istio-eastwestgateway-istio-system-east"}) {
					t.Errorf("workloads %v, want reviews-v1 and reviews-v2 (legacy opted out)", got)
				}
				w := workload(s, "reviews-v1-bookinfo-east")
				k := w.GetSpec().GetKubernetes()
				if k.GetControllerKind() != "Deployment" || k.GetReadyPods() != 2 || k.GetServiceAccountName() != "bookinfo-reviews" ||
					w.GetSpec().GetMesh().GetName() != "istiod-istio-system-east" {
					t.Errorf("workload reviews-v1 %v", w)
				}
				d := destination(s, "reviews-bookinfo-east")
				if d == nil {
					t.Fatalf("destinations %v lack reviews", names(s.GetDestinations()))
				}
				if vs := d.GetSpec().GetKubeService().GetSubsets()["version"].GetValues(); !slices.Equal(vs, []string{"v1", "v2"}) {
					t.Errorf("reviews subsets %v, want version v1, v2", vs)
				}
				if d.GetSpec().GetMesh().GetName() != "istiod-istio-system-east" {
					t.Errorf("reviews mesh %v", d.GetSpec().GetMesh())
				}
				if destination(s, "legacy-bookinfo-east") != nil {
					t.Error("legacy, which fronts no sidecar, is a destination")
				}
				if len(skipped) != 1 || !strings.Contains(skipped[0], "Job bookinfo/migrate (batch/v1)") {
					t.Errorf("skipped %q, want the Job", skipped)
				}
			},
		},
		{
			name:  "without injection nothing is a workload",
			files: []string{"istio.yaml", "plain-app.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, _ []string) {
				if workload(s, "web-default-east") != nil || destination(s, "web-default-east") != nil {
					t.Errorf("workloads %v, destinations %v: the namespace has no injection label", names(s.GetWorkloads()), names(s.GetDestinations()))
				}
			},
		},
		{
			name:  "the users' VirtualServices and DestinationRules, not Meshplane's (issue 16 item 14)",
			files: []string{"user-istio.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, skipped []string) {
				want := []*snapshotv1.UserIstioObject{
					{Kind: "DestinationRule", Namespace: "default", Name: "ratings-user", Hosts: []string{"ratings.bookinfo.svc.cluster.local"}},
					{Kind: "VirtualService", Namespace: "bookinfo", Name: "reviews-canary", Hosts: []string{"reviews"}, ExportTo: []string{"."}},
				}
				got := s.GetUserIstioObjects()
				slices.SortFunc(got, func(a, b *snapshotv1.UserIstioObject) int { return strings.Compare(a.GetKind(), b.GetKind()) })
				if len(got) != len(want) {
					t.Fatalf("user Istio objects %v, want %v", got, want)
				}
				for i := range want {
					if !proto.Equal(got[i], want[i]) {
						t.Errorf("user Istio object %d: %v, want %v", i, got[i], want[i])
					}
				}
				if len(skipped) != 1 || !strings.Contains(skipped[0], "Gateway bookinfo/not-read") {
					t.Errorf("skipped %q, want the Gateway", skipped)
				}
			},
		},
		{
			name:  "istiod's version from its only container, and the legacy istio-pilot (issue 16 item 6)",
			files: []string{"istiod-renamed.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, _ []string) {
				got := map[string]string{}
				for _, m := range s.GetMeshes() {
					got[m.GetMetadata().GetName()] = m.GetSpec().GetIstio().GetInstallation().GetVersion()
				}
				want := map[string]string{"istiod-istio-system-east": "1.23.1", "istio-pilot-legacy-istio-east": "1.4.10"}
				if !maps.Equal(got, want) {
					t.Errorf("mesh versions %v, want %v", got, want)
				}
			},
		},
		{
			name:  "sidecars by injector annotation and native sidecar, in a cluster without istiod (issue 16 item 7)",
			files: []string{"sidecars-no-istiod.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, _ []string) {
				if got := names(s.GetWorkloads()); !slices.Equal(got, []string{"cart-annotated-shop-east", "cart-native-shop-east"}) {
					t.Errorf("workloads %v, want the annotated and the native-sidecar pods", got)
				}
				for _, w := range s.GetWorkloads() {
					if w.GetSpec().GetMesh() != nil {
						t.Errorf("workload %s has mesh %v; no istiod is in the cluster", w.GetMetadata().GetName(), w.GetSpec().GetMesh())
					}
				}
				d := destination(s, "cart-shop-east")
				if d == nil || d.GetSpec().GetMesh() != nil {
					t.Fatalf("destination cart %v, want one without a mesh", d)
				}
				if vs := d.GetSpec().GetKubeService().GetSubsets()["variant"].GetValues(); !slices.Equal(vs, []string{"annotated", "native"}) {
					t.Errorf("cart subsets %v: only the sidecar pods' workloads count", vs)
				}
			},
		},
		{
			name:  "gateway addresses from spec.externalIPs and a node's ExternalDNS (issue 16 item 5)",
			files: []string{"gateway-addresses.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, _ []string) {
				if len(s.GetMeshes()) != 1 {
					t.Fatalf("meshes %v, want one", s.GetMeshes())
				}
				is := s.GetMeshes()[0].GetSpec().GetIstio()
				ew, in := is.GetEastWestGateways(), is.GetIngressGateways()
				if len(ew) != 1 || ew[0].GetExternalAddress() != "192.0.2.5" || ew[0].GetExternalTlsPort() != 15443 || ew[0].GetTlsContainerPort() != 15444 {
					t.Errorf("east-west gateways %v, want 192.0.2.5:15443 (the first external IP, the Service port)", ew)
				}
				if len(in) != 1 || in[0].GetExternalAddress() != "node-a.east.example" || in[0].GetExternalTlsPort() != 31443 {
					t.Errorf("ingress gateways %v, want node-a.east.example:31443 (ExternalDNS over InternalIP, the node port)", in)
				}
			},
		},
		{
			name:  "a live dump: pods, ReplicaSet ownership, endpoints and locality",
			files: []string{"istio.yaml", "ratings-live.yaml"},
			check: func(t *testing.T, s *snapshotv1.InputSnapshot, _ []string) {
				w := workload(s, "ratings-v1-bookinfo-east")
				if w == nil {
					t.Fatalf("workloads %v lack ratings-v1", names(s.GetWorkloads()))
				}
				if k := w.GetSpec().GetKubernetes(); k.GetControllerKind() != "Deployment" || k.GetReadyPods() != 1 {
					t.Errorf("workload %v", w)
				}
				if workload(s, "ratings-v1-5d8f-bookinfo-east") != nil || len(s.GetWorkloads()) != 1 {
					t.Errorf("workloads %v: with pods given, controllers stand for no more", names(s.GetWorkloads()))
				}
				ks := destination(s, "ratings-bookinfo-east").GetSpec().GetKubeService()
				eps := ks.GetEndpointSubsets()
				if len(eps) != 1 || len(eps[0].GetEndpoints()) != 1 {
					t.Fatalf("endpoints %v", eps)
				}
				e := eps[0].GetEndpoints()[0]
				if e.GetIpAddress() != "10.1.0.7" || e.GetSubLocality().GetZone() != "eu-west-1a" || e.GetLabels()["version"] != "v1" {
					t.Errorf("endpoint %v", e)
				}
				if ks.GetRegion() != "eu-west-1" {
					t.Errorf("region %q", ks.GetRegion())
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, skipped := discover(t, tc.files...)
			tc.check(t, s, skipped)
		})
	}
}

func TestFromManifestsErrors(t *testing.T) {
	for _, tc := range []struct{ name, js, want string }{
		{"wrong field type", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":"x"}}`, "f.yaml: Service s (v1): json: cannot unmarshal string"},
		{"bad mesh config", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"istio","namespace":"istio-system"},"data":{"mesh":"a: [b"}}`, "field data.mesh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := discovery.FromManifests(discovery.Identity{Cluster: "east"}, discovery.Options{}, []discovery.Manifest{{Where: "f.yaml", JSON: []byte(tc.js)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestFromManifestsGatewayDetector discovers a gateway that Istio's
// default labels do not select: it is found only with the detector that
// Settings give the cluster (an output snapshot's gateway_detector, which
// the agent and meshctl render discover with), and its TLS port is the one
// the detector names (issue 16 item 5).
func TestFromManifestsGatewayDetector(t *testing.T) {
	ms := manifests(t, "gateway-custom-labels.yaml")
	eastWest := func(opts discovery.Options) []*discoveryv1.MeshSpec_Gateway {
		t.Helper()
		s, _, err := discovery.FromManifests(discovery.Identity{Cluster: "east"}, opts, ms)
		if err != nil {
			t.Fatalf("FromManifests: %v", err)
		}
		if len(s.GetMeshes()) != 1 {
			t.Fatalf("meshes %v, want one", names(s.GetMeshes()))
		}
		return s.GetMeshes()[0].GetSpec().GetIstio().GetEastWestGateways()
	}
	if gws := eastWest(discovery.Options{}); len(gws) != 0 {
		t.Fatalf("without a detector, east-west gateways %v, want none: the gateway carries no istio=eastwestgateway label", gws)
	}
	if gws := eastWest(discovery.Options{}.WithDetector(nil)); len(gws) != 0 {
		t.Fatalf("with no detector, east-west gateways %v, want none", gws)
	}
	detector := &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
		EastWestGatewayLabels:      map[string]string{"gateway": "corp-eastwest"},
		EastWestGatewayTlsPortName: "mtls",
	}
	gws := eastWest(discovery.Options{}.WithDetector(detector))
	if len(gws) != 1 {
		t.Fatalf("with the detector, east-west gateways %v, want corp-eastwest", gws)
	}
	if gw := gws[0]; gw.GetService().GetName() != "corp-eastwest" || gw.GetExternalAddress() != "203.0.113.30" ||
		gw.GetExternalTlsPort() != 15443 || gw.GetTlsContainerPort() != 15444 {
		t.Errorf("gateway %v, want corp-eastwest at 203.0.113.30:15443 (the port named mtls), container port 15444", gw)
	}
	// The labels alone, with the default TLS port name: the port named tls.
	gws = eastWest(discovery.Options{}.WithDetector(&settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
		EastWestGatewayLabels: map[string]string{"gateway": "corp-eastwest"},
	}))
	if len(gws) != 1 || gws[0].GetExternalTlsPort() != 443 || gws[0].GetTlsContainerPort() != 8443 {
		t.Errorf("with the labels alone, gateways %v, want corp-eastwest on the port named tls (443, container 8443)", gws)
	}
}
