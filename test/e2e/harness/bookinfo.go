package harness

import (
	"fmt"
	"strings"
)

// BookinfoNamespace holds the bookinfo fixture.
const BookinfoNamespace = "bookinfo"

// ReviewsAccessPolicyYAML is an AccessPolicy, applied in the management
// cluster, that lets productpage of east and of west GET reviews: the
// demo's and the e2e tests' policy for a VirtualMesh that denies by
// default.
const ReviewsAccessPolicyYAML = `apiVersion: networking.meshplane.dev/v1
kind: AccessPolicy
metadata: {name: reviews, namespace: bookinfo}
spec:
  sourceSelector:
  - kubeServiceAccountRefs:
      serviceAccounts:
      - {name: bookinfo-productpage, namespace: bookinfo, cluster: east}
      - {name: bookinfo-productpage, namespace: bookinfo, cluster: west}
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  allowedMethods: [GET]
`

// BookinfoServices are the Services of the fixture.
var BookinfoServices = []string{"details", "productpage", "ratings", "reviews"}

type workload struct{ app, version string }

var bookinfoWorkloads = []workload{
	{"productpage", "v1"}, {"details", "v1"}, {"ratings", "v1"},
	{"reviews", "v1"}, {"reviews", "v2"}, {"reviews", "v3"},
}

// Bookinfo returns the bookinfo fixture as YAML: the namespace, service
// accounts, Services, Deployments and, because a bare API server runs no
// controllers, one sidecar-injected Pod per Deployment.
func Bookinfo(cluster string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    istio-injection: enabled
`, BookinfoNamespace)
	for _, svc := range BookinfoServices {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: bookinfo-%[1]s
  namespace: %[2]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    app: %[1]s
    service: %[1]s
spec:
  selector:
    app: %[1]s
  ports:
  - name: http
    port: 9080
    targetPort: 9080
`, svc, BookinfoNamespace)
	}
	for _, w := range bookinfoWorkloads {
		name := w.app + "-" + w.version
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {app: %[3]s, version: %[4]s}
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[3]s, version: %[4]s}
  template:
    metadata:
      labels: {app: %[3]s, version: %[4]s}
    spec:
      serviceAccountName: bookinfo-%[3]s
      containers:
      - name: %[3]s
        image: docker.io/istio/examples-bookinfo-%[3]s-%[4]s:1.20.2
        ports: [{containerPort: 9080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-0
  namespace: %[2]s
  labels: {app: %[3]s, version: %[4]s, security.istio.io/tlsMode: istio, topology.istio.io/cluster: %[5]s}
spec:
  serviceAccountName: bookinfo-%[3]s
  containers:
  - name: %[3]s
    image: docker.io/istio/examples-bookinfo-%[3]s-%[4]s:1.20.2
    ports: [{containerPort: 9080}]
  - name: istio-proxy
    image: docker.io/istio/proxyv2:1.24.0
`, name, BookinfoNamespace, w.app, w.version, cluster)
	}
	return []byte(b.String())
}

// IstioNamespace holds the Istio control-plane fixture.
const IstioNamespace = "istio-system"

// IstioControlPlane returns an istiod of the given revision ("" for the
// default one) as YAML: its Deployment, the pod a controller would have made
// from it, its service account and its mesh config ConfigMap (istio or
// istio-<revision>) with trustDomain. Apply it beside Bookinfo to give the
// cluster a mesh; without it, the cluster has sidecar pods and no istiod.
func IstioControlPlane(revision, version, trustDomain string) []byte {
	name, cm, revLabel := "istiod", "istio", "default"
	if revision != "" {
		name, cm, revLabel = "istiod-"+revision, "istio-"+revision, revision
	}
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[2]s
  namespace: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[3]s
  namespace: %[1]s
  labels: {istio.io/rev: %[4]s}
data:
  mesh: |
    defaultConfig:
      discoveryAddress: %[2]s.%[1]s.svc:15012
    trustDomain: %[6]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
  labels: {app: istiod, istio.io/rev: %[4]s}
spec:
  replicas: 1
  selector:
    matchLabels: {app: istiod, istio.io/rev: %[4]s}
  template:
    metadata:
      labels: {app: istiod, istio: pilot, istio.io/rev: %[4]s}
    spec:
      serviceAccountName: %[2]s
      containers:
      - name: discovery
        image: docker.io/istio/pilot:%[5]s
---
apiVersion: v1
kind: Pod
metadata:
  name: %[2]s-0
  namespace: %[1]s
  labels: {app: istiod, istio: pilot, istio.io/rev: %[4]s}
spec:
  serviceAccountName: %[2]s
  containers:
  - name: discovery
    image: docker.io/istio/pilot:%[5]s
`, IstioNamespace, name, cm, revLabel, version, trustDomain))
}

// EastWestGateway returns an east-west gateway of the default revision as
// YAML: a pod labelled istio=eastwestgateway and its LoadBalancer Service
// with the "tls" port 15443. No controller runs in a test API server, so the
// test writes the Service's status.loadBalancer itself when it needs an
// external address.
func EastWestGateway(network string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: istio-eastwestgateway-0
  namespace: %[1]s
  labels: {istio: eastwestgateway, app: istio-eastwestgateway, topology.istio.io/network: %[2]s}
spec:
  containers:
  - name: istio-proxy
    image: docker.io/istio/proxyv2:1.24.0
---
apiVersion: v1
kind: Service
metadata:
  name: istio-eastwestgateway
  namespace: %[1]s
  labels: {istio: eastwestgateway, topology.istio.io/network: %[2]s}
spec:
  type: LoadBalancer
  selector: {istio: eastwestgateway, topology.istio.io/network: %[2]s}
  ports:
  - {name: status-port, port: 15021, targetPort: 15021}
  - {name: tls, port: 15443, targetPort: 15443}
`, IstioNamespace, network))
}
