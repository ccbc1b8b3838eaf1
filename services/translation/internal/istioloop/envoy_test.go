package istioloop

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	// The typed configs of Istio's routes and listeners, so that failures
	// print them as JSON.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"
)

// xds is what istiod told one proxy: its clusters, listeners and the
// route configurations asked for, over one ADS stream (kept open for EDS
// and ECDS).
type xds struct {
	ads       *istiotest.ADS
	clusters  map[string]*clusterv3.Cluster
	listeners map[string]*listenerv3.Listener
	routes    map[string]*routev3.RouteConfiguration
}

// fetch connects as p and asks, like Envoy, for CDS, LDS and then RDS of
// routes, until ready says the answer holds what the test is about ("" for
// yes, else what is missing): istiod pushes what it learns from the API
// server a little after the first answer.
func (m *mesh) fetch(t *testing.T, p istiotest.Proxy, routes []string, ready func(*xds) string) *xds {
	t.Helper()
	var got *xds
	eventually(t, "the xDS of "+p.Name, func() string {
		if got != nil {
			got.ads.Close()
		}
		ads, cs := m.clusters(t, p)
		x := &xds{ads: ads, clusters: cs}
		got = x
		ls, err := ads.Listeners()
		if err != nil {
			return err.Error()
		}
		x.listeners = ls
		if len(routes) > 0 {
			if x.routes, err = ads.Routes(routes...); err != nil {
				return err.Error()
			}
		}
		return ready(x)
	})
	envoyAccepts(t, p.Name, got)
	return got
}

// envoyAccepts checks every resource of x against Envoy's own constraints
// on its fields (the protoc-gen-validate rules go-control-plane carries),
// which Envoy checks before it takes a resource: a resource that breaks
// one would be NACKed, the whole response with it.
func envoyAccepts(t *testing.T, proxy string, x *xds) {
	t.Helper()
	type validator interface{ ValidateAll() error }
	check := func(kind, name string, r validator) {
		if err := r.ValidateAll(); err != nil {
			t.Errorf("Envoy would reject %s %s of %s: %v\n%s", kind, name, proxy, err, protoText(r.(proto.Message)))
		}
	}
	for n, c := range x.clusters {
		check("cluster", n, c)
	}
	for n, l := range x.listeners {
		check("listener", n, l)
	}
	for n, r := range x.routes {
		check("route configuration", n, r)
	}
}

// route returns the virtual host for host:port of what x holds, or why
// there is none.
func (x *xds) vhost(host string, port uint32) (*routev3.VirtualHost, string) {
	name := fmt.Sprint(port)
	rc, ok := x.routes[name]
	if !ok {
		return nil, "no route configuration " + name
	}
	vh := istiotest.VirtualHost(rc, host)
	if vh == nil {
		return nil, fmt.Sprintf("route configuration %s has no virtual host for %s", name, host)
	}
	return vh, ""
}

// fromVirtualService says whether Istio built route r from a
// VirtualService (rather than its default route).
func fromVirtualService(r *routev3.Route) bool {
	cfg := r.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue()
	return strings.Contains(cfg, "/virtual-service/")
}

// object is one Meshplane resource of a golden case's input, as YAML, for
// failure messages.
type object struct {
	desc string // kind namespace/name
	yaml string
}

// meshplaneObject finds the resource name in list (trafficPolicies,
// accessPolicies, virtualMeshes, virtualDestinations,
// wasmDeploymentPolicies) of any cluster's input of golden case c.
func meshplaneObject(t *testing.T, c, list, name string) object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(*goldenDir, c, "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []map[string]any
	if err := yaml.Unmarshal(raw, &inputs); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	for _, in := range inputs {
		items, _ := in[list].([]any)
		for _, it := range items {
			o, _ := it.(map[string]any)
			md, _ := o["metadata"].(map[string]any)
			if md["name"] != name {
				continue
			}
			b, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			return object{desc: fmt.Sprintf("%s %v/%v (golden case %s, cluster %v)", list, md["namespace"], name, c, in["cluster"]), yaml: string(b)}
		}
	}
	t.Fatalf("golden case %s has no %s named %s", c, list, name)
	return object{}
}

// envoyCheck compares the Envoy fields that one Meshplane resource became
// with what it means. A failure names both fields and prints the
// Meshplane resource and the Envoy resource.
type envoyCheck struct {
	t        *testing.T
	obj      object
	label    string // the Envoy resource, e.g. "route 9080, virtual host reviews...:9080, route 0"
	resource proto.Message
}

func (m object) on(t *testing.T, label string, resource proto.Message) envoyCheck {
	return envoyCheck{t: t, obj: m, label: label, resource: resource}
}

// equal checks that the Envoy field envoy, got, is want, as the
// Meshplane field field says.
func (c envoyCheck) equal(field, envoy string, got, want any) {
	c.t.Helper()
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		c.fail(field, envoy, fmt.Sprintf("(-want +got):\n%s", diff))
	}
}

// that checks a condition on the Envoy field, described by want.
func (c envoyCheck) that(field, envoy string, ok bool, got any, want string) {
	c.t.Helper()
	if !ok {
		c.fail(field, envoy, fmt.Sprintf("got %v, want %s", got, want))
	}
}

func (c envoyCheck) fail(field, envoy, detail string) {
	c.t.Helper()
	c.t.Errorf("Meshplane %s -> Envoy %s of %s: %s\n--- Meshplane %s:\n%s--- Envoy %s:\n%s",
		field, envoy, c.label, detail, c.obj.desc, c.obj.yaml, c.label, protoText(c.resource))
}

// protoText renders m as JSON, or as text when it holds a type this test
// does not link (Istio's own filter configs).
func protoText(m proto.Message) string {
	if b, err := (protojson.MarshalOptions{Multiline: true, Indent: "  "}).Marshal(m); err == nil {
		return string(b)
	}
	b, err := prototext.MarshalOptions{Multiline: true}.Marshal(m)
	if err != nil {
		return fmt.Sprintf("(unprintable %T: %v)", m, err)
	}
	return string(b)
}

// filterNames lists the names of HTTP filters.
func filterNames[F interface{ GetName() string }](fs []F) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.GetName())
	}
	return out
}

// indexOf returns the index of the first name with prefix, or -1.
func indexOf(names []string, prefix string) int {
	return slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}
