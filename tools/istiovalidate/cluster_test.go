package istiovalidate_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/meshplane/meshplane/tools/istiovalidate"
)

// The parts of a golden input.yaml (a list of input snapshots in protojson
// field names, see services/translation/testdata/golden/README.md) that
// say what a cluster's API server holds: the Services and pods the agent
// discovered, and istiod with its gateways.
type (
	inputSnapshot struct {
		Cluster      string        `json:"cluster"`
		Meshes       []mesh        `json:"meshes"`
		Destinations []destination `json:"destinations"`
		Workloads    []workload    `json:"workloads"`
	}
	objectMeta struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	mesh struct {
		Metadata objectMeta `json:"metadata"`
		Spec     struct {
			Istio *struct {
				Installation struct {
					Namespace string            `json:"namespace"`
					PodLabels map[string]string `json:"podLabels"`
					Revision  string            `json:"revision"`
				} `json:"installation"`
				TrustDomain      string    `json:"trustDomain"`
				IngressGateways  []gateway `json:"ingressGateways"`
				EastWestGateways []gateway `json:"eastWestGateways"`
			} `json:"istio"`
		} `json:"spec"`
	}
	gateway struct {
		WorkloadLabels   map[string]string `json:"workloadLabels"`
		ExternalTLSPort  uint32            `json:"externalTlsPort"`
		TLSContainerPort uint32            `json:"tlsContainerPort"`
		Service          objectMeta        `json:"service"`
	}
	destination struct {
		Spec struct {
			KubeService *struct {
				Ref                    objectMeta        `json:"ref"`
				WorkloadSelectorLabels map[string]string `json:"workloadSelectorLabels"`
				Labels                 map[string]string `json:"labels"`
				Ports                  []struct {
					Port             uint32 `json:"port"`
					Name             string `json:"name"`
					Protocol         string `json:"protocol"`
					AppProtocol      string `json:"appProtocol"`
					TargetPortNumber uint32 `json:"targetPortNumber"`
					TargetPortName   string `json:"targetPortName"`
				} `json:"ports"`
			} `json:"kubeService"`
		} `json:"spec"`
	}
	workload struct {
		Metadata objectMeta `json:"metadata"`
		Spec     struct {
			Kubernetes *struct {
				PodLabels          map[string]string `json:"podLabels"`
				ServiceAccountName string            `json:"serviceAccountName"`
			} `json:"kubernetes"`
		} `json:"spec"`
	}
)

// liveCluster is what `istioctl analyze` would read from a workload
// cluster's API server besides Meshplane's output.
type liveCluster struct {
	// Objects are the Namespaces, Services and Pods.
	Objects []istiovalidate.Object
	// MeshConfig has the mesh's trust domain.
	MeshConfig string
}

// readClusters reads a golden input.yaml and returns, per cluster, the
// Kubernetes objects its discovered Mesh, Destinations and Workloads stand
// for:
//
//   - a Service per Destination, with its ports, labels and selector;
//   - a Pod per Workload, with its labels and service account, injected
//     (an istio-proxy container and Istio's sidecar status annotation:
//     the agent discovers only pods with a sidecar);
//   - istiod's Pod, and a Service and Pod per gateway of the Mesh, with
//     the gateway's TLS port;
//   - a Namespace for each, labelled for injection where mesh workloads
//     and their Services are (the workloads are injected, so their
//     namespace is), and not where istiod alone runs.
func readClusters(t *testing.T, path string) map[string]liveCluster {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var inputs []inputSnapshot
	if err := yaml.Unmarshal(raw, &inputs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]liveCluster{}
	for _, in := range inputs {
		b := &clusterBuilder{t: t, namespaces: map[string]map[string]string{}}
		trustDomain := ""
		for _, m := range in.Meshes {
			if m.Spec.Istio == nil {
				continue
			}
			b.mesh(m)
			if trustDomain == "" {
				trustDomain = m.Spec.Istio.TrustDomain
			}
		}
		for _, d := range in.Destinations {
			if d.Spec.KubeService != nil {
				b.service(d)
			}
		}
		for _, w := range in.Workloads {
			if w.Spec.Kubernetes != nil {
				b.pod(w.Metadata.Namespace, w.Metadata.Name+"-0", w.Spec.Kubernetes.PodLabels, w.Spec.Kubernetes.ServiceAccountName, injectedPod)
			}
		}
		lc := liveCluster{Objects: b.build()}
		if trustDomain != "" {
			lc.MeshConfig = "trustDomain: " + trustDomain + "\n"
		}
		out[in.Cluster] = lc
	}
	return out
}

type clusterBuilder struct {
	t          *testing.T
	namespaces map[string]map[string]string
	objects    []istiovalidate.Object
}

func (b *clusterBuilder) add(apiVersion, kind, namespace, name string, labels, annotations map[string]string, body map[string]any) {
	b.t.Helper()
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
		if b.namespaces[namespace] == nil {
			b.namespaces[namespace] = map[string]string{}
		}
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	m := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	maps.Copy(m, body)
	js, err := json.Marshal(m)
	if err != nil {
		b.t.Fatal(err)
	}
	b.objects = append(b.objects, istiovalidate.Object{JSON: js, Ref: istiovalidate.Ref{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}})
}

func (b *clusterBuilder) mesh(m mesh) {
	ist := m.Spec.Istio
	ns := ist.Installation.Namespace
	labels := maps.Clone(ist.Installation.PodLabels)
	if ist.Installation.Revision != "" {
		labels["istio.io/rev"] = ist.Installation.Revision
	}
	b.pod(ns, m.Metadata.Name+"-0", labels, "istiod", plainPod)
	b.namespaceLabel(ns, "istio-injection", "disabled")
	for _, gws := range [][]gateway{ist.IngressGateways, ist.EastWestGateways} {
		for _, gw := range gws {
			target := gw.TLSContainerPort
			if target == 0 {
				target = gw.ExternalTLSPort
			}
			svcNS := gw.Service.Namespace
			if svcNS == "" {
				svcNS = ns
			}
			b.add("v1", "Service", svcNS, gw.Service.Name, gw.WorkloadLabels, nil, map[string]any{"spec": map[string]any{
				"selector": gw.WorkloadLabels,
				"ports":    []any{map[string]any{"name": "tls", "port": gw.ExternalTLSPort, "targetPort": target, "protocol": "TCP"}},
			}})
			b.pod(svcNS, gw.Service.Name+"-0", gw.WorkloadLabels, gw.Service.Name, gatewayPod, target)
		}
	}
}

func (b *clusterBuilder) service(d destination) {
	ks := d.Spec.KubeService
	var ports []any
	for _, p := range ks.Ports {
		port := map[string]any{"port": p.Port, "name": p.Name}
		if p.Protocol != "" {
			port["protocol"] = p.Protocol
		}
		if p.AppProtocol != "" {
			port["appProtocol"] = p.AppProtocol
		}
		switch {
		case p.TargetPortNumber != 0:
			port["targetPort"] = p.TargetPortNumber
		case p.TargetPortName != "":
			port["targetPort"] = p.TargetPortName
		}
		ports = append(ports, port)
	}
	b.add("v1", "Service", ks.Ref.Namespace, ks.Ref.Name, ks.Labels, nil, map[string]any{"spec": map[string]any{
		"selector": ks.WorkloadSelectorLabels, "ports": ports,
	}})
	// A Destination fronts mesh workloads.
	b.injected(ks.Ref.Namespace)
}

type podKind int

const (
	plainPod    podKind = iota // istiod
	injectedPod                // a mesh workload: app and Istio's sidecar
	gatewayPod                 // a gateway: Istio's proxy alone
)

// pod adds a running pod of kind, whose first container has ports. An
// injected pod's namespace is labelled for injection.
func (b *clusterBuilder) pod(namespace, name string, labels map[string]string, serviceAccount string, kind podKind, ports ...uint32) {
	var cports []any
	for _, p := range ports {
		cports = append(cports, map[string]any{"containerPort": p})
	}
	proxy := map[string]any{"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.31.1"}
	var containers []any
	var annotations map[string]string
	switch kind {
	case plainPod:
		containers = []any{map[string]any{"name": "discovery", "image": "docker.io/istio/pilot:1.31.1", "ports": cports}}
	case injectedPod:
		containers = []any{map[string]any{"name": "app", "image": "example.com/app:1", "ports": cports}, proxy}
		annotations = map[string]string{"sidecar.istio.io/status": `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy"]}`}
		b.injected(namespace)
	case gatewayPod:
		proxy["ports"] = cports
		containers = []any{proxy}
	}
	b.add("v1", "Pod", namespace, name, labels, annotations, map[string]any{
		"spec":   map[string]any{"serviceAccountName": serviceAccount, "containers": containers},
		"status": map[string]any{"phase": "Running", "podIP": "10.0.0.1"},
	})
}

// namespaceLabel labels a namespace, unless it has the label already.
func (b *clusterBuilder) namespaceLabel(namespace, key, value string) {
	if b.namespaces[namespace] == nil {
		b.namespaces[namespace] = map[string]string{}
	}
	if _, ok := b.namespaces[namespace][key]; !ok {
		b.namespaces[namespace][key] = value
	}
}

// injected labels a namespace where mesh workloads run for injection.
func (b *clusterBuilder) injected(namespace string) {
	b.namespaceLabel(namespace, "istio-injection", "enabled")
	b.namespaces[namespace]["istio-injection"] = "enabled"
}

func (b *clusterBuilder) build() []istiovalidate.Object {
	nss := slices.Sorted(maps.Keys(b.namespaces))
	out := make([]istiovalidate.Object, 0, len(nss)+len(b.objects))
	for _, ns := range nss {
		js, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns, "labels": b.namespaces[ns]}})
		if err != nil {
			b.t.Fatal(err)
		}
		out = append(out, istiovalidate.Object{JSON: js, Ref: istiovalidate.Ref{APIVersion: "v1", Kind: "Namespace", Name: ns}})
	}
	return append(out, b.objects...)
}

// describe lists objects, one a line, for failure messages.
func describe(objs []istiovalidate.Object) string {
	var lines []string
	for _, o := range objs {
		lines = append(lines, fmt.Sprintf("  %s", o.JSON))
	}
	return strings.Join(lines, "\n")
}
