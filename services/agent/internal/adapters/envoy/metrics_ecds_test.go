package envoy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	extensionv3 "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/envoy"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func label(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

func istioLabels(src, dst, code string) []*dto.LabelPair {
	return []*dto.LabelPair{
		label("reporter", "destination"), label("source_workload", src), label("source_workload_namespace", "bookinfo"),
		label("destination_service", dst), label("response_code", code), label("request_protocol", "http"),
	}
}

func requestsFamily(values map[string]float64) *dto.MetricFamily {
	f := &dto.MetricFamily{Name: proto.String("istio_requests_total"), Type: dto.MetricType_COUNTER.Enum()}
	for src, v := range values {
		f.Metric = append(f.Metric, &dto.Metric{Label: istioLabels(src, "reviews.bookinfo.svc.cluster.local", "200"), Counter: &dto.Counter{Value: proto.Float64(v)}})
	}
	return f
}

func durationsFamily(count uint64, sumMs float64, buckets map[float64]uint64) *dto.MetricFamily {
	h := &dto.Histogram{SampleCount: &count, SampleSum: &sumMs}
	for _, ub := range []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000} {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(ub), CumulativeCount: proto.Uint64(buckets[ub])})
	}
	return &dto.MetricFamily{Name: proto.String("istio_request_duration_milliseconds"), Type: dto.MetricType_HISTOGRAM.Enum(),
		Metric: []*dto.Metric{{Label: istioLabels("productpage-v1", "reviews.bookinfo.svc.cluster.local", "200"), Histogram: h}}}
}

// gather returns the value of each series of name as "labels=value".
func gather(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

func TestMetricsServiceReexportsIstioRequestMetrics(t *testing.T) {
	agg := app.NewRequestMetrics(0)
	reg := prometheus.NewRegistry()
	reg.MustRegister(envoy.NewRequestMetricsCollector(agg))
	conn := serve(t, envoy.ServerOptions{Metrics: agg, Log: testLogger(t)})

	stream, err := metricsv3.NewMetricsServiceClient(conn).StreamMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id := &metricsv3.StreamMetricsMessage_Identifier{Node: node("reviews-v1-abc", "bookinfo", nil)}
	other := &dto.MetricFamily{Name: proto.String("envoy_cluster_upstream_rq"), Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(99)}}}}
	for _, m := range []*metricsv3.StreamMetricsMessage{
		{Identifier: id, EnvoyMetrics: []*dto.MetricFamily{requestsFamily(map[string]float64{"productpage-v1": 10}), durationsFamily(10, 120, map[float64]uint64{5: 2, 10: 6, 25: 10})}},
		{EnvoyMetrics: []*dto.MetricFamily{other, requestsFamily(map[string]float64{"productpage-v1": 25}), durationsFamily(25, 300, map[float64]uint64{5: 5, 10: 15, 25: 25})}},
	} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	key := "destination_service=reviews.bookinfo.svc.cluster.local,reporter=destination,response_code=200,source_workload=productpage-v1,source_workload_namespace=bookinfo"
	eventually(t, "the requests counter", func() bool { return gather(t, reg, "meshplane_agent_envoy_requests_total")[key] == 25 })
	if got := gather(t, reg, "meshplane_agent_envoy_request_duration_seconds")[key]; got != 25 {
		t.Errorf("duration count = %v, want 25", got)
	}
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "meshplane_agent_envoy_request_duration_seconds" {
			h := f.GetMetric()[0].GetHistogram()
			if s := h.GetSampleSum(); s < 0.2999 || s > 0.3001 {
				t.Errorf("duration sum = %v s, want 0.3", s)
			}
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() == 0.01 && b.GetCumulativeCount() != 15 {
					t.Errorf("bucket le=0.01 = %d, want 15", b.GetCumulativeCount())
				}
			}
		}
	}
}

func TestMetricsServiceCapsCardinality(t *testing.T) {
	agg := app.NewRequestMetrics(3)
	reg := prometheus.NewRegistry()
	reg.MustRegister(envoy.NewRequestMetricsCollector(agg))
	conn := serve(t, envoy.ServerOptions{Metrics: agg, Log: testLogger(t)})
	stream, err := metricsv3.NewMetricsServiceClient(conn).StreamMetrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for i := range 5 {
		values[fmt.Sprintf("w%d", i)] = 1
	}
	if err := stream.Send(&metricsv3.StreamMetricsMessage{Identifier: &metricsv3.StreamMetricsMessage_Identifier{Node: node("p", "bookinfo", nil)}, EnvoyMetrics: []*dto.MetricFamily{requestsFamily(values)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the overflow counter", func() bool { return gather(t, reg, "meshplane_agent_envoy_series_overflow_total")[""] == 2 })
	series := gather(t, reg, "meshplane_agent_envoy_requests_total")
	if len(series) != 4 {
		t.Errorf("series = %v, want 3 plus other", series)
	}
	if v := series["destination_service=other,reporter=destination,response_code=other,source_workload=other,source_workload_namespace=other"]; v != 2 {
		t.Errorf("other = %v, want 2", v)
	}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func wasmConfig(version, greeting string) app.EnvoyConfig {
	return app.EnvoyConfig{Version: version, WasmFilters: []*snapshotv1.WasmFilterConfig{
		{Name: "meshplane.bookinfo.hello.greeter", Policy: &commonv1.ObjectRef{Namespace: "bookinfo", Name: "hello"}, Url: "https://wasm.example.com/greeter.wasm", Sha256: sha, RootId: "greeter", ConfigJson: []byte(`{"greeting":"` + greeting + `"}`)},
		{Name: "meshplane.bookinfo.hello.oci", Policy: &commonv1.ObjectRef{Namespace: "bookinfo", Name: "hello"}},
	}}
}

type ackCounter struct {
	mu          sync.Mutex
	acks, nacks int
}

func (a *ackCounter) ECDSAcked(nack bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if nack {
		a.nacks++
	} else {
		a.acks++
	}
}

func (a *ackCounter) get() (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acks, a.nacks
}

func TestECDSServesAndPushesWasmFilters(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	acks := &ackCounter{}
	ecds := envoy.NewECDS(ctx, acks, testLogger(t))
	ecds.SetEnvoyConfig(wasmConfig("v1", "hello"))
	conn := serve(t, envoy.ServerOptions{ECDS: ecds, Log: testLogger(t)})

	stream, err := extensionv3.NewExtensionConfigDiscoveryServiceClient(conn).StreamExtensionConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := node("reviews-v1-abc", "bookinfo", nil)
	names := []string{"meshplane.bookinfo.hello.greeter"}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: resourcev3.ExtensionConfigType, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	recv := func(wantVersion, wantGreeting string) *discoveryv3.DiscoveryResponse {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetVersionInfo() != wantVersion || len(resp.GetResources()) != 1 {
			t.Fatalf("response version %q with %d resources, want %q with 1", resp.GetVersionInfo(), len(resp.GetResources()), wantVersion)
		}
		var tec corev3.TypedExtensionConfig
		if err := resp.GetResources()[0].UnmarshalTo(&tec); err != nil {
			t.Fatal(err)
		}
		var w wasmfilterv3.Wasm
		if err := tec.GetTypedConfig().UnmarshalTo(&w); err != nil {
			t.Fatal(err)
		}
		remote := w.GetConfig().GetVmConfig().GetCode().GetRemote()
		var cfg wrapperspb.StringValue
		if err := w.GetConfig().GetConfiguration().UnmarshalTo(&cfg); err != nil {
			t.Fatal(err)
		}
		if tec.GetName() != names[0] || remote.GetSha256() != sha || remote.GetHttpUri().GetUri() != "https://wasm.example.com/greeter.wasm" ||
			remote.GetHttpUri().GetCluster() != "outbound|443||wasm.example.com" || w.GetConfig().GetRootId() != "greeter" ||
			cfg.GetValue() != `{"greeting":"`+wantGreeting+`"}` {
			t.Fatalf("resource = %v / %v, want the greeter filter saying %q", &tec, &w, wantGreeting)
		}
		return resp
	}
	resp := recv("v1", "hello")
	// ACK v1.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: resourcev3.ExtensionConfigType, ResourceNames: names, VersionInfo: "v1", ResponseNonce: resp.GetNonce()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ACK", func() bool { a, _ := acks.get(); return a == 1 })

	// A new EnvoyConfig reaches the open stream.
	ecds.SetEnvoyConfig(wasmConfig("v2", "bonjour"))
	resp = recv("v2", "bonjour")
	// NACK v2: the proxy keeps v1 and says why.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: resourcev3.ExtensionConfigType, ResourceNames: names, VersionInfo: "v1", ResponseNonce: resp.GetNonce(), ErrorDetail: &status.Status{Code: 3, Message: "wasm: failed to load"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NACK", func() bool { _, n := acks.get(); return n == 1 })
	// The next version is pushed after a NACK too.
	ecds.SetEnvoyConfig(wasmConfig("v3", "hola"))
	recv("v3", "hola")
}

func TestWasmExtensionConfigRejectsBadFilters(t *testing.T) {
	for _, f := range []*snapshotv1.WasmFilterConfig{
		{Name: "oci-only"},
		{Name: "ftp", Url: "ftp://x/y.wasm", Sha256: sha},
		{Name: "short-sha", Url: "https://x/y.wasm", Sha256: "abc"},
		{Name: "bad-json", Url: "https://x/y.wasm", Sha256: sha, ConfigJson: []byte("{")},
		{Url: "https://x/y.wasm", Sha256: sha},
	} {
		if _, err := envoy.WasmExtensionConfig(f); err == nil {
			t.Errorf("%q: no error", f.GetName())
		}
	}
}
