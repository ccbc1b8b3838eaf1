package harness

import (
	"fmt"
	"strings"
)

// BookinfoNamespace holds the bookinfo fixture.
const BookinfoNamespace = "bookinfo"

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
