package istioloop

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	wasmhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// wasmFilterName is the HTTP filter name Istio gives WasmPlugin
// namespace/name.
func wasmFilterName(namespace, name string) string {
	return "extensions.istio.io/trafficextension/" + namespace + "." + name + "~istio-translated-wasmplugin"
}

// WasmDeploymentPolicy auth (golden case wasm-deployment, cluster east):
// its WasmPlugins become ECDS filters in the HTTP filter chain of the
// selected workloads' inbound listener, in phase order, and istiod serves
// each filter's config (URL, SHA-256, root ID, configuration) over ECDS.
//
// The config source is istiod's ADS stream, not the agent's ECDS server
// on port 9977: translation writes WasmPlugins, which istiod serves
// itself; nothing in Meshplane's output points a proxy at 9977 (see
// docs/istio-in-the-loop.md).
func TestWasmDeploymentPolicyOnEnvoy(t *testing.T) {
	const c = "wasm-deployment"
	b := newBookinfo("bookinfo")
	cart := pod{namespace: "shop", name: "cart-1", ip: "10.1.0.16", serviceAccount: "cart",
		labels: map[string]string{"app": "cart"}, containerPort: 8080}
	m := b.start(t, c, "east", "cluster.local", cart)
	policy := meshplaneObject(t, c, "wasmDeploymentPolicies", "auth")
	jwt, headers := wasmFilterName("bookinfo", "auth.0.jwt"), wasmFilterName("bookinfo", "auth.0.headers")

	x, chains, filters := inboundFilters(t, m, b.reviewsV1)
	label := "listener virtualInbound of reviews-v1, chain " + chains[0].GetName()
	names := filterNames(filters)
	check := policy.on(t, label, chains[0])
	ij, ih, ir := indexOf(names, jwt), indexOf(names, headers), indexOf(names, "envoy.filters.http.router")
	var stats []string
	for _, n := range names {
		if strings.HasPrefix(n, "extensions.istio.io/trafficextension/bookinfo.metrics.") {
			stats = append(stats, n)
		}
	}
	check.that("spec.workloadSelectors[0] (app=reviews), spec.filters[0].name jwt, [1].name headers", "http_filters names",
		ij >= 0 && ih >= 0, names, "both "+jwt+" and "+headers)
	check.that("spec.filters[0].phase AUTHN before spec.filters[1].phase (unspecified: after Istio's filters)", "http_filters order",
		ij < ih && ih < ir, names, "jwt, then headers, then the router")
	metrics := meshplaneObject(t, c, "wasmDeploymentPolicies", "metrics")
	metrics.on(t, label, chains[0]).equal("spec.filters[*].priority (20, unset, -1; one phase: higher runs first)", "http_filters order",
		stats, []string{wasmFilterName("bookinfo", "metrics.high"), wasmFilterName("bookinfo", "metrics.zero"), wasmFilterName("bookinfo", "metrics.negative")})
	is := indexOf(names, wasmFilterName("bookinfo", "metrics.high"))
	metrics.on(t, label, chains[0]).that("spec.filters[*].phase STATS (between AUTHN and unspecified)", "http_filters order",
		ij < is && is < ih, names, "jwt (AUTHN), then the STATS filters, then headers (unspecified)")
	for _, i := range []int{ij, ih} {
		if i < 0 {
			continue
		}
		f := filters[i]
		cd := f.GetConfigDiscovery()
		policy.on(t, label+" filter "+f.GetName(), f).that("spec.filters[]", "http_filters[].config_discovery.config_source (istiod's ADS)",
			cd.GetConfigSource().GetAds() != nil, cd.GetConfigSource(), "ads")
		policy.on(t, label+" filter "+f.GetName(), f).that("spec.filters[]", "http_filters[].config_discovery.type_urls",
			slices.Contains(cd.GetTypeUrls(), "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"), cd.GetTypeUrls(), "the Wasm filter type")
	}

	// The jwt filter's config, over ECDS.
	ecds, err := x.ads.ExtensionConfigs(jwt)
	if err != nil {
		t.Fatal(err)
	}
	tec, ok := ecds[jwt]
	if !ok {
		t.Fatalf("ECDS has no %s", jwt)
	}
	w := &wasmhttpv3.Wasm{}
	if err := tec.GetTypedConfig().UnmarshalTo(w); err != nil {
		t.Fatalf("decode %s: %v", jwt, err)
	}
	wc := policy.on(t, "ECDS "+jwt, tec)
	remote := w.GetConfig().GetVmConfig().GetCode().GetRemote()
	wc.equal("spec.filters[0].http.url", "Wasm.config.vm_config.code.remote.http_uri.uri", remote.GetHttpUri().GetUri(), "https://filters.example.com/jwt.wasm")
	wc.equal("spec.filters[0].http.sha256", "Wasm.config.vm_config.code.remote.sha256", remote.GetSha256(), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
	wc.equal("spec.filters[0].rootId", "Wasm.config.root_id", w.GetConfig().GetRootId(), "jwt_root")
	sv := &wrapperspb.StringValue{}
	var cfg map[string]any
	if err := w.GetConfig().GetConfiguration().UnmarshalTo(sv); err != nil || json.Unmarshal([]byte(sv.GetValue()), &cfg) != nil {
		wc.fail("spec.filters[0].config", "Wasm.config.configuration", fmt.Sprintf("not a JSON string (%v): %v", err, w.GetConfig().GetConfiguration()))
	} else {
		wc.equal("spec.filters[0].config", "Wasm.config.configuration (JSON)", cfg, map[string]any{"issuer": "https://issuer.example.com", "audiences": []any{"reviews"}})
	}

	// The OCI image: istiod passes its reference on (istio-agent pulls it).
	hcfg, err := x.ads.ExtensionConfigs(headers)
	if err != nil {
		t.Fatal(err)
	}
	hw := &wasmhttpv3.Wasm{}
	if tec, ok := hcfg[headers]; !ok || tec.GetTypedConfig().UnmarshalTo(hw) != nil {
		t.Fatalf("ECDS has no Wasm config %s: %v", headers, hcfg)
	}
	policy.on(t, "ECDS "+headers, hcfg[headers]).equal("spec.filters[1].ociImage", "Wasm.config.vm_config.code.remote.http_uri.uri",
		hw.GetConfig().GetVmConfig().GetCode().GetRemote().GetHttpUri().GetUri(), "oci://ghcr.io/example/add-header:1.0")

	// Not selected: productpage. Selected by the second selector: cart in
	// namespace shop.
	_, ppChains, ppFilters := inboundFilters(t, m, b.productpage)
	policy.on(t, "listener virtualInbound of productpage-v1, chain "+ppChains[0].GetName(), ppChains[0]).that(
		"spec.workloadSelectors (productpage is in neither)", "http_filters names", indexOf(filterNames(ppFilters), "extensions.istio.io/") < 0,
		filterNames(ppFilters), "no Wasm filter")
	_, cartChains, cartFilters := inboundFilters(t, m, cart)
	policy.on(t, "listener virtualInbound of cart-1, chain "+cartChains[0].GetName(), cartChains[0]).that(
		"spec.workloadSelectors[1] (app=cart in namespace shop)", "http_filters names", indexOf(filterNames(cartFilters), wasmFilterName("shop", "auth.1.jwt")) >= 0,
		filterNames(cartFilters), wasmFilterName("shop", "auth.1.jwt"))
}

// inboundFilters waits for p's inbound HTTP chains of port 8080 and
// returns them and the HTTP filters of the first.
func inboundFilters(t *testing.T, m *mesh, p pod) (*xds, []*listenerv3.FilterChain, []*hcmv3.HttpFilter) {
	t.Helper()
	x := m.fetch(t, p.proxy(), nil, func(x *xds) string {
		if _, err := istiotest.InboundChains(x.listeners, 8080); err != nil {
			return err.Error()
		}
		return ""
	})
	chains, _ := istiotest.InboundChains(x.listeners, 8080)
	fs, err := istiotest.HTTPFilters(chains[0])
	if err != nil {
		t.Fatal(err)
	}
	return x, chains, fs
}
