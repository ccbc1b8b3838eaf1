package e2e

import (
	"fmt"
	"testing"

	"github.com/meshplane/meshplane/test/e2e/harness"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var serviceEntries = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}

// corpGateway is west's east-west gateway, labelled and named as Istio's
// defaults do not: a pod and a Service reached at spec.externalIPs, whose
// mTLS port is named mtls.
const corpGateway = `apiVersion: v1
kind: Pod
metadata:
  name: corp-eastwest-0
  namespace: istio-system
  labels: {gateway: corp-eastwest}
spec:
  containers:
  - name: istio-proxy
    image: docker.io/istio/proxyv2:1.24.0
---
apiVersion: v1
kind: Service
metadata:
  name: corp-eastwest
  namespace: istio-system
spec:
  selector: {gateway: corp-eastwest}
  externalIPs: [203.0.113.21]
  ports:
  - {name: status-port, port: 15021, targetPort: 15021}
  - {name: mtls, port: 15443, targetPort: 15443}
`

// Issue 16 item 5 over two real API servers with their agents: Settings
// in the management cluster give west its own gateway detector, west's
// agent receives it in its output snapshot, discovers its gateway with it
// and pushes it, and east's ServiceEntry for west's federated reviews
// reaches west through it. An edit of west's entry reaches west's agent,
// which discovers again: the port follows.
func TestSettingsGatewayDetectorPerCluster(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	e := startEstateWith(t, estateOptions{allInOne: true, mgmt: true})
	east, west := e.clusters[0], e.clusters[1]
	for _, c := range e.clusters {
		if err := c.ApplyYAML(ctx, harness.IstioControlPlane("", "1.24.0", c.Name+".local")); err != nil {
			t.Fatal(err)
		}
	}
	if err := west.ApplyYAML(ctx, []byte(corpGateway)); err != nil {
		t.Fatal(err)
	}
	settings := func(port string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: meshplane}
---
apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: global, namespace: meshplane}
spec:
  meshes:
  - {name: istiod-istio-system-east, namespace: istio-system}
  - {name: istiod-istio-system-west, namespace: istio-system}
  federation:
    permissive: {}
---
apiVersion: settings.meshplane.dev/v1
kind: Settings
metadata: {name: settings, namespace: meshplane}
spec:
  discovery:
    gatewayDetectors:
      "*":
        eastWestGatewayLabels: {istio: eastwestgateway}
      west:
        eastWestGatewayLabels: {gateway: corp-eastwest}
        eastWestGatewayTlsPortName: %s
`, port))
	}
	if err := e.mgmt.ApplyYAML(ctx, settings("mtls")); err != nil {
		t.Fatal(err)
	}
	waitSpec(t, east, serviceEntries, harness.IstioNamespace, "reviews.bookinfo.svc.west.global",
		[]string{`"address":"203.0.113.21"`, `15443`}, e.procs)

	if err := e.mgmt.ApplyYAML(ctx, settings("status-port")); err != nil {
		t.Fatal(err)
	}
	waitSpec(t, east, serviceEntries, harness.IstioNamespace, "reviews.bookinfo.svc.west.global",
		[]string{`"address":"203.0.113.21"`, `15021`}, e.procs)
}
