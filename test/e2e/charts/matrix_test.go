package charts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

const (
	mgmtNamespace  = "meshplane"
	agentNamespace = "meshplane-agent"
)

const agentRelayValues = `cluster: east
relayAddr: meshplane.example.com:9900
caBundle: |
  -----BEGIN CERTIFICATE-----
  MIIBfake
  -----END CERTIFICATE-----
bootstrapToken: mpbt_example
`

// matrixCase is one value set of one chart.
type matrixCase struct {
	name, chart, ns, values string
	// kinds are counts of kinds the render must hold (others may be there).
	kinds map[string]int
	check func(t *testing.T, objs []*unstructured.Unstructured)
}

var mgmtServices = []string{"registration", "ingest", "translation", "distribution"}

var matrix = []matrixCase{
	{
		name: "umbrella defaults", chart: "meshplane", ns: mgmtNamespace, values: "{}\n",
		kinds: map[string]int{"Deployment": 4, "StatefulSet": 1, "Service": 6, "ServiceAccount": 4, "PodDisruptionBudget": 0, "ServiceMonitor": 0, "NetworkPolicy": 0, "Certificate": 0},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, svc := range mgmtServices {
				args := containerArgs(t, objs, "Deployment", "r-"+svc, svc)
				wantArgs(t, args, "--redis-addrs=r-redis:6379", "--tls-cert-file=/etc/meshplane/tls/tls.crt", "--tls-client-ca-file=/etc/meshplane/tls/ca.crt", "--trust-domain=meshplane.local", "--install=meshplane")
			}
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-ingest", "ingest"), "--translation-addr=r-translation:9903", "--translation-cert-file=/etc/meshplane/tls/tls.crt")
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-registration", "registration"), "--ca-dir=/var/run/meshplane/ca")
			wantVolume(t, objs, "r-registration", "ca", "emptyDir")
		},
	},
	{
		name: "umbrella HA with PDB and topology spread", chart: "meshplane", ns: mgmtNamespace,
		values: haValues(),
		kinds:  map[string]int{"Deployment": 4, "PodDisruptionBudget": 4},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, svc := range mgmtServices {
				d := find(t, objs, "Deployment", "r-"+svc)
				if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 3 {
					t.Errorf("%s replicas = %d, want 3", svc, r)
				}
				tsc, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "topologySpreadConstraints")
				if len(tsc) != 2 {
					t.Fatalf("%s: %d topology spread constraints, want 2", svc, len(tsc))
				}
				sel, _, _ := unstructured.NestedStringMap(tsc[0].(map[string]any), "labelSelector", "matchLabels")
				if sel["app.kubernetes.io/name"] != svc || sel["app.kubernetes.io/instance"] != "r" {
					t.Errorf("%s: spread selector %v does not select the release's pods", svc, sel)
				}
				if _, ok, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "affinity", "podAntiAffinity"); !ok {
					t.Errorf("%s: no pod anti-affinity", svc)
				}
			}
		},
	},
	{
		name: "umbrella with external Redis Sentinel", chart: "meshplane", ns: mgmtNamespace,
		values: `redis:
  enabled: false
global:
  redis:
    addrs: [sentinel-0.redis:26379, sentinel-1.redis:26379, sentinel-2.redis:26379]
    masterName: mymaster
    db: 2
    passwordSecret:
      name: redis-auth
      key: redis-password
`,
		kinds: map[string]int{"Deployment": 4, "StatefulSet": 0},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, svc := range mgmtServices {
				wantArgs(t, containerArgs(t, objs, "Deployment", "r-"+svc, svc),
					"--redis-addrs=sentinel-0.redis:26379,sentinel-1.redis:26379,sentinel-2.redis:26379",
					"--redis-master-name=mymaster", "--redis-db=2", "--redis-password-file=/etc/meshplane/redis/password")
				wantVolume(t, objs, "r-"+svc, "redis-password", "secret")
			}
		},
	},
	{
		name: "umbrella with Redis Cluster behind one address, registration waiting for a replica", chart: "meshplane", ns: mgmtNamespace,
		values: `redis:
  enabled: false
global:
  redis:
    addrs: [redis-cluster.redis:6379]
    cluster: true
registration:
  redisWait:
    replicas: 1
    timeout: 2s
`,
		kinds: map[string]int{"Deployment": 4, "StatefulSet": 0},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, svc := range mgmtServices {
				args := containerArgs(t, objs, "Deployment", "r-"+svc, svc)
				wantArgs(t, args, "--redis-addrs=redis-cluster.redis:6379", "--redis-cluster")
				if svc == "registration" {
					wantArgs(t, args, "--redis-wait-replicas=1", "--redis-wait-timeout=2s")
				} else if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--redis-wait") }) {
					t.Errorf("%s: --redis-wait-* is registration's alone: %v", svc, args)
				}
			}
		},
	},
	{
		name: "umbrella with bundled Redis, persistent and with a password", chart: "meshplane", ns: mgmtNamespace,
		values: `redis:
  enabled: true
  persistence:
    enabled: true
    size: 2Gi
global:
  redis:
    passwordSecret:
      name: redis-auth
`,
		kinds: map[string]int{"StatefulSet": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sts := find(t, objs, "StatefulSet", "r-redis")
			if v, _, _ := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates"); len(v) != 1 {
				t.Errorf("want one volumeClaimTemplate, got %d", len(v))
			}
			wantArgs(t, containerArgs(t, objs, "StatefulSet", "r-redis", "redis"), "--requirepass", "--appendonly")
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-distribution", "distribution"), "--redis-addrs=r-redis:6379", "--redis-password-file=/etc/meshplane/redis/password")
		},
	},
	{
		name: "umbrella with cert-manager TLS", chart: "meshplane", ns: mgmtNamespace,
		values: `global:
  trustDomain: prod.example.com
  tls:
    certManager:
      issuerRef: {name: meshplane-ca, kind: ClusterIssuer}
`,
		kinds: map[string]int{"Certificate": 4},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, svc := range mgmtServices {
				c := find(t, objs, "Certificate", "r-"+svc)
				uris, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "uris")
				if !slices.Equal(uris, []string{"spiffe://prod.example.com/service/" + svc}) {
					t.Errorf("%s: uris %v", svc, uris)
				}
				if s, _, _ := unstructured.NestedString(c.Object, "spec", "secretName"); s != "r-"+svc+"-tls" {
					t.Errorf("%s: secretName %q", svc, s)
				}
				if k, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "kind"); k != "ClusterIssuer" {
					t.Errorf("%s: issuer kind %q", svc, k)
				}
				wantVolumeSecret(t, objs, "r-"+svc, "tls", "r-"+svc+"-tls")
			}
		},
	},
	{
		name: "umbrella with your own PKI", chart: "meshplane", ns: mgmtNamespace,
		values: `registration:
  ca:
    secretName: meshplane-ca
  bootstrapTokens:
    secretName: static-tokens
  advertiseAddr: meshplane.example.com:9900
  certTTL: 12h
  tls:
    secretName: registration-tls
ingest:
  tls:
    secretName: ingest-tls
translation:
  tls:
    secretName: translation-tls
distribution:
  tls:
    secretName: distribution-tls
global:
  tls:
    clientCA:
      secretName: meshplane-ca
      key: root.crt
`,
		kinds: map[string]int{"Deployment": 4, "Certificate": 0},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, svc := range mgmtServices {
				wantVolumeSecret(t, objs, "r-"+svc, "tls", svc+"-tls")
				wantVolumeSecret(t, objs, "r-"+svc, "client-ca", "meshplane-ca")
				wantArgs(t, containerArgs(t, objs, "Deployment", "r-"+svc, svc), "--tls-client-ca-file=/etc/meshplane/client-ca/root.crt")
			}
			wantVolumeSecret(t, objs, "r-registration", "ca", "meshplane-ca")
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-registration", "registration"),
				"--bootstrap-tokens-file=/etc/meshplane/bootstrap-tokens/tokens", "--advertise-addr=meshplane.example.com:9900", "--cert-ttl=12h")
		},
	},
	{
		name: "umbrella with ServiceMonitors", chart: "meshplane", ns: mgmtNamespace,
		values: "global:\n  serviceMonitor:\n    enabled: true\n",
		kinds:  map[string]int{"ServiceMonitor": 4},
	},
	{
		name: "umbrella with NetworkPolicies", chart: "meshplane", ns: mgmtNamespace,
		values: "global:\n  networkPolicy:\n    enabled: true\n",
		kinds:  map[string]int{"NetworkPolicy": 5},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			np := find(t, objs, "NetworkPolicy", "r-translation")
			b, _ := json.Marshal(np.Object["spec"])
			if !strings.Contains(string(b), `"app.kubernetes.io/component":"ingest"`) {
				t.Errorf("translation's policy does not limit its RPC port to ingest: %s", b)
			}
		},
	},
	{
		name: "umbrella with an HTTPRoute front door", chart: "meshplane", ns: mgmtNamespace,
		values: `frontDoor:
  type: httproute
  hosts: [meshplane.example.com]
  httproute:
    parentRefs:
      - {name: relay, namespace: gateways, sectionName: meshplane}
`,
		kinds: map[string]int{"HTTPRoute": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			r := find(t, objs, "HTTPRoute", "r-relay")
			rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
			got := map[string]string{}
			for _, rule := range rules {
				m := rule.(map[string]any)
				path := m["matches"].([]any)[0].(map[string]any)["path"].(map[string]any)["value"].(string)
				be := m["backendRefs"].([]any)[0].(map[string]any)
				got[path] = fmt.Sprintf("%v:%v", be["name"], be["port"])
			}
			want := map[string]string{
				"/meshplane.registration.v1.": "r-registration:9901",
				"/meshplane.ingest.v1.":       "r-ingest:9902",
				"/meshplane.distribution.v1.": "r-distribution:9904",
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("routes %v, want %v", got, want)
			}
		},
	},
	{
		name: "umbrella with an Istio front door", chart: "meshplane", ns: mgmtNamespace,
		values: `frontDoor:
  type: istio
  hosts: [meshplane.example.com]
  istio:
    backendCredentialName: meshplane-services-ca
`,
		kinds: map[string]int{"Gateway": 1, "VirtualService": 1, "DestinationRule": 3},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			vs := find(t, objs, "VirtualService", "r-relay")
			b, _ := json.Marshal(vs.Object["spec"])
			for _, want := range []string{`"prefix":"/meshplane.registration.v1."`, `"host":"r-ingest.meshplane.svc.cluster.local"`, `"number":9904`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("VirtualService lacks %s: %s", want, b)
				}
			}
		},
	},
	{
		name: "umbrella in plaintext for local runs", chart: "meshplane", ns: mgmtNamespace,
		values: "registration:\n  tls: {plaintext: true}\ningest:\n  tls: {plaintext: true}\ntranslation:\n  tls: {plaintext: true}\ndistribution:\n  tls: {plaintext: true}\n",
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-ingest", "ingest"), "--plaintext", "--translation-plaintext")
		},
	},
	{name: "registration alone", chart: "registration", ns: mgmtNamespace, values: "{}\n", kinds: map[string]int{"Deployment": 1}},
	{name: "ingest alone", chart: "ingest", ns: mgmtNamespace, values: "translation:\n  addr: translation.meshplane:9903\n", kinds: map[string]int{"Deployment": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			// The input limits default to the binary's defaults, written out.
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-ingest", "ingest"), "--translation-addr=translation.meshplane:9903",
				"--max-input-destinations=10000", "--max-input-workloads=20000", "--max-input-meshes=100", "--max-input-policies=10000", "--max-input-istio-objects=20000")
		}},
	{name: "ingest with input limits", chart: "ingest", ns: mgmtNamespace, values: "inputLimits: {destinations: 50000, workloads: 0, meshes: 5, policies: 200, istioObjects: 300}\n", kinds: map[string]int{"Deployment": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-ingest", "ingest"),
				"--max-input-destinations=50000", "--max-input-workloads=0", "--max-input-meshes=5", "--max-input-policies=200", "--max-input-istio-objects=300")
		}},
	{name: "translation alone", chart: "translation", ns: mgmtNamespace, values: "debounce: 50ms\nworkloadClusterDomain: example.local\nencodingCacheMiB: 0\n", kinds: map[string]int{"Deployment": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-translation", "translation"), "--debounce=50ms", "--encoding-cache-mib=0")
		}},
	{name: "distribution alone", chart: "distribution", ns: mgmtNamespace, values: "redis:\n  addrs: [redis:6379]\n", kinds: map[string]int{"Deployment": 1}},
	{
		name: "umbrella with the console", chart: "meshplane", ns: mgmtNamespace, values: "console:\n  enabled: true\n  viewerRole:\n    groups: [sre]\n",
		kinds: map[string]int{"Deployment": 5, "ClusterRole": 2, "ClusterRoleBinding": 3},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-console", "console"),
				"--registration-addr=r-registration:9901", "--ingest-addr=r-ingest:9902", "--translation-addr=r-translation:9903", "--distribution-addr=r-distribution:9904",
				"--upstream-cert-file=/etc/meshplane/tls/tls.crt", "--tls-cert-file=/etc/meshplane/tls/tls.crt")
			role := find(t, objs, "ClusterRole", "meshplane-console-viewer")
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			if len(rules) != 4 {
				t.Errorf("the viewer ClusterRole has %d rules, want 4 (files/viewer-clusterrole.yaml)", len(rules))
			}
			b := find(t, objs, "ClusterRoleBinding", "r-console-viewers")
			if subj, _, _ := unstructured.NestedSlice(b.Object, "subjects"); len(subj) != 1 || subj[0].(map[string]any)["name"] != "sre" {
				t.Errorf("the viewers binding's subjects = %v, want the group sre", subj)
			}
		},
	},
	{
		name: "console alone, with a browser certificate", chart: "console", ns: mgmtNamespace,
		values: "management:\n  registrationAddr: mp.example.com:9900\n  ingestAddr: mp.example.com:9900\n  translationAddr: mp.example.com:9900\n  distributionAddr: mp.example.com:9900\nweb:\n  tls:\n    secretName: console-public\n",
		kinds:  map[string]int{"Deployment": 1, "ClusterRoleBinding": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-console", "console"),
				"--ingest-addr=mp.example.com:9900", "--tls-cert-file=/etc/meshplane/web-tls/tls.crt", "--upstream-cert-file=/etc/meshplane/tls/tls.crt")
			wantVolume(t, objs, "r-console", "web-tls", "secret")
		},
	},
	{
		name: "agent with a relay address", chart: "agent", ns: agentNamespace, values: agentRelayValues,
		kinds: map[string]int{"Deployment": 1, "Secret": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "ServiceAccount": 1, "Role": 0},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			wantArgs(t, containerArgs(t, objs, "Deployment", "r-agent", "agent"),
				"--cluster=east", "--relay-addr=meshplane.example.com:9900", "--relay-ca-file=/etc/meshplane/relay-ca/ca.crt",
				"--token-file=/etc/meshplane/bootstrap/token", "--state-dir=/var/run/meshplane/agent",
				"--envoy-addr=:9977", "--accesslog-queue=10000", "--envoy-metrics-max-series=10000")
			wantVolume(t, objs, "r-agent", "state", "emptyDir")
			wantObject(t, objs, "Service", "r-agent-envoy")
		},
	},
	{
		name: "agent with per-service addresses and existing Secrets", chart: "agent", ns: agentNamespace,
		values: `cluster: west
registrationAddr: registration.meshplane.example.com:443
ingestAddr: ingest.meshplane.example.com:443
distributionAddr: distribution.meshplane.example.com:443
serverName: meshplane.example.com
caBundleSecret: {name: meshplane-ca, key: root.crt}
bootstrapTokenSecret: {name: meshplane-token}
excludeNamespaces: kube-system,istio-system
serviceMonitor: {enabled: true}
networkPolicy: {enabled: true}
podDisruptionBudget: {enabled: true}
`,
		kinds: map[string]int{"Deployment": 1, "Secret": 0, "ServiceMonitor": 1, "NetworkPolicy": 1, "PodDisruptionBudget": 1},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := containerArgs(t, objs, "Deployment", "r-agent", "agent")
			wantArgs(t, args, "--registration-addr=registration.meshplane.example.com:443", "--ingest-addr=ingest.meshplane.example.com:443",
				"--distribution-addr=distribution.meshplane.example.com:443", "--server-name=meshplane.example.com", "--exclude-namespaces=kube-system,istio-system")
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--relay-addr") }) {
				t.Errorf("--relay-addr set without relayAddr: %v", args)
			}
			wantVolumeSecret(t, objs, "r-agent", "relay-ca", "meshplane-ca")
			wantVolumeSecret(t, objs, "r-agent", "bootstrap-token", "meshplane-token")
		},
	},
}

// agentReplicas is the agent with three Raft replicas.
var agentReplicas = matrixCase{
	name: "agent with three Raft replicas", chart: "agent", ns: agentNamespace,
	values: agentRelayValues + "replicas: 3\nnetworkPolicy: {enabled: true}\nraft: {memberTimeout: 90s}\n",
	kinds:  map[string]int{"Deployment": 1, "PodDisruptionBudget": 1, "NetworkPolicy": 1},
	check: func(t *testing.T, objs []*unstructured.Unstructured) {
		wantArgs(t, containerArgs(t, objs, "Deployment", "r-agent", "agent"),
			"--raft-bind-addr=:9979", "--raft-dir=/var/run/meshplane/raft",
			"--raft-peers-dns=r-agent-raft.meshplane-agent.svc.cluster.local", "--raft-bootstrap-expect=3", "--raft-member-timeout=90s")
		wantVolume(t, objs, "r-agent", "raft", "emptyDir")
		svc := find(t, objs, "Service", "r-agent-raft")
		if ip, _, _ := unstructured.NestedString(svc.Object, "spec", "clusterIP"); ip != "None" {
			t.Errorf("the Raft Service is not headless: clusterIP %q", ip)
		}
		if v, _, _ := unstructured.NestedBool(svc.Object, "spec", "publishNotReadyAddresses"); !v {
			t.Error("the Raft Service does not publish replicas before they are ready")
		}
		pdb := find(t, objs, "PodDisruptionBudget", "r-agent")
		if v, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(v) != "1" {
			t.Errorf("PDB maxUnavailable %v, want 1", v)
		}
	},
}

func init() { matrix = append(matrix, agentReplicas) }

func haValues() string {
	var b strings.Builder
	for _, svc := range mgmtServices {
		fmt.Fprintf(&b, `%s:
  replicas: 3
  podDisruptionBudget: {enabled: true, minAvailable: 2}
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels: {app.kubernetes.io/name: %s}
  resources:
    requests: {cpu: 500m, memory: 512Mi}
    limits: {memory: 2Gi}
`, svc, svc)
	}
	return b.String()
}

// renderCache keeps each case's render for the flag test.
var renderCache sync.Map

func render(t *testing.T, tc matrixCase) []*unstructured.Unstructured {
	t.Helper()
	if v, ok := renderCache.Load(tc.name); ok {
		return v.([]*unstructured.Unstructured)
	}
	objs, err := template(t, tc.chart, "r", tc.ns, tc.values)
	if err != nil {
		t.Fatal(err)
	}
	renderCache.Store(tc.name, objs)
	return objs
}

// TestTemplateMatrix renders every value set, checks what it must hold and
// the security defaults, and applies every object with server-side dry-run
// to a real API server in namespaces that warn on the restricted Pod
// Security Standard.
func TestTemplateMatrix(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{mgmtNamespace, agentNamespace} {
		createNamespace(ctx, t, c.Clientset().CoreV1().Namespaces(), ns)
	}
	for _, tc := range matrix {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc)
			counts := map[string]int{}
			for _, o := range objs {
				counts[o.GetKind()]++
			}
			for kind, n := range tc.kinds {
				if counts[kind] != n {
					t.Errorf("%d %s, want %d (rendered: %v)", counts[kind], kind, n, counts)
				}
			}
			checkSecurityDefaults(t, objs)
			if tc.check != nil {
				tc.check(t, objs)
			}
			warnings := &warningCollector{}
			cfg := c.RESTConfig()
			cfg.WarningHandler = warnings
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := dryRunApply(ctx, dyn, c.Mapper(), o, tc.ns); err != nil {
					t.Errorf("dry-run %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			for _, w := range warnings.list() {
				t.Errorf("API server warning: %s", w)
			}
		})
	}
}

func createNamespace(ctx context.Context, t *testing.T, nss interface {
	Create(context.Context, *corev1.Namespace, metav1.CreateOptions) (*corev1.Namespace, error)
}, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if _, err := nss.Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func dryRunApply(ctx context.Context, dyn dynamic.Interface, mapper meta.ResettableRESTMapper, o *unstructured.Unstructured, ns string) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("map %s: %w", gvk, err)
	}
	ri := dyn.Resource(m.Resource)
	var client dynamic.ResourceInterface = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			return fmt.Errorf("namespaced object without metadata.namespace")
		}
		if o.GetNamespace() != ns {
			return fmt.Errorf("namespace %q, want the release namespace %q", o.GetNamespace(), ns)
		}
		client = ri.Namespace(o.GetNamespace())
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	_, err = client.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager: "meshplane-chart-test", Force: &force, DryRun: []string{metav1.DryRunAll},
	})
	return err
}

type warningCollector struct {
	mu sync.Mutex
	w  []string
}

var _ rest.WarningHandler = (*warningCollector)(nil)

func (c *warningCollector) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w = append(c.w, text)
}

func (c *warningCollector) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.w)
}

// checkSecurityDefaults checks every pod template against the defaults the
// charts promise, beyond what Pod Security admission warns about.
func checkSecurityDefaults(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
			t.Errorf("%s: pod runAsNonRoot is not true", o.GetName())
		}
		if v, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
			t.Errorf("%s: pod seccompProfile %q", o.GetName(), v)
		}
		containers, _, _ := unstructured.NestedSlice(pod, "containers")
		for _, ci := range containers {
			cm := ci.(map[string]any)
			name := fmt.Sprintf("%s/%v", o.GetName(), cm["name"])
			sc, _, _ := unstructured.NestedMap(cm, "securityContext")
			if v, _, _ := unstructured.NestedBool(sc, "readOnlyRootFilesystem"); !v {
				t.Errorf("%s: readOnlyRootFilesystem is not true", name)
			}
			if v, ok, _ := unstructured.NestedBool(sc, "allowPrivilegeEscalation"); !ok || v {
				t.Errorf("%s: allowPrivilegeEscalation is not false", name)
			}
			if v, _, _ := unstructured.NestedStringSlice(sc, "capabilities", "drop"); !slices.Equal(v, []string{"ALL"}) {
				t.Errorf("%s: capabilities.drop = %v", name, v)
			}
			if _, ok, _ := unstructured.NestedMap(cm, "resources", "requests"); !ok {
				t.Errorf("%s: no resource requests", name)
			}
			if o.GetKind() == "Deployment" {
				for _, probe := range []string{"livenessProbe", "readinessProbe"} {
					path, _, _ := unstructured.NestedString(cm, probe, "httpGet", "path")
					port, _, _ := unstructured.NestedFieldNoCopy(cm, probe, "httpGet", "port")
					want := map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"}[probe]
					if path != want || port != "admin" {
						t.Errorf("%s: %s is %s on %v, want %s on the admin port", name, probe, path, port, want)
					}
				}
			}
		}
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the render", kind, name)
	return nil
}

func containerArgs(t *testing.T, objs []*unstructured.Unstructured, kind, name, container string) []string {
	t.Helper()
	o := find(t, objs, kind, name)
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		cm := c.(map[string]any)
		if cm["name"] == container {
			args, _, _ := unstructured.NestedStringSlice(cm, "args")
			return args
		}
	}
	t.Fatalf("%s %s has no container %s", kind, name, container)
	return nil
}

func wantArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %s: %v", w, args)
		}
	}
}

func volume(t *testing.T, objs []*unstructured.Unstructured, deployment, name string) map[string]any {
	t.Helper()
	d := find(t, objs, "Deployment", deployment)
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	for _, v := range vols {
		if vm := v.(map[string]any); vm["name"] == name {
			return vm
		}
	}
	t.Fatalf("%s has no volume %s", deployment, name)
	return nil
}

func wantVolume(t *testing.T, objs []*unstructured.Unstructured, deployment, name, source string) {
	t.Helper()
	if _, ok := volume(t, objs, deployment, name)[source]; !ok {
		t.Errorf("%s: volume %s is not a %s", deployment, name, source)
	}
}

func wantVolumeSecret(t *testing.T, objs []*unstructured.Unstructured, deployment, name, secret string) {
	t.Helper()
	v := volume(t, objs, deployment, name)
	if got, _, _ := unstructured.NestedString(v, "secret", "secretName"); got != secret {
		t.Errorf("%s: volume %s mounts Secret %q, want %q", deployment, name, got, secret)
	}
}

// wantObject fails unless the rendered objects hold kind/name.
func wantObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return
		}
	}
	t.Errorf("no %s %s rendered", kind, name)
}
