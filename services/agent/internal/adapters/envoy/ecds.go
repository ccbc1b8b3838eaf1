package envoy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ecdsNode is the one snapshot every proxy is served from: proxies ask for
// the filters they use by name, so they need not be told apart.
const ecdsNode = "meshplane"

type allNodes struct{}

func (allNodes) ID(*corev3.Node) string { return ecdsNode }

// ECDSMetrics counts the proxies' answers to ECDS responses.
type ECDSMetrics interface {
	ECDSAcked(nack bool)
}

// ECDS serves the Wasm filter configs of the current EnvoyConfig as
// TypedExtensionConfig resources (type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig),
// versioned by the EnvoyConfig's version. A new version reaches every
// connected proxy at once, over its open stream.
type ECDS struct {
	cache   cachev3.SnapshotCache
	server  serverv3.Server
	log     *slog.Logger
	metrics ECDSMetrics

	mu sync.Mutex
	// sent is the nonce and version of the last response on each stream.
	sent map[int64]sentResponse
}

type sentResponse struct{ nonce, version string }

var _ app.EnvoyConfigSink = (*ECDS)(nil)

// NewECDS returns an ECDS server with nothing to serve until the first
// EnvoyConfig; it stops its streams when ctx ends.
func NewECDS(ctx context.Context, metrics ECDSMetrics, log *slog.Logger) *ECDS {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &ECDS{cache: cachev3.NewSnapshotCache(false, allNodes{}, xdsLogger{log}), log: log, metrics: metrics, sent: map[int64]sentResponse{}}
	e.server = serverv3.NewServer(ctx, e.cache, serverv3.CallbackFuncs{
		StreamRequestFunc: e.onRequest,
		StreamResponseFunc: func(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.sent[id] = sentResponse{nonce: resp.GetNonce(), version: resp.GetVersionInfo()}
		},
		StreamClosedFunc: func(id int64, _ *corev3.Node) {
			e.mu.Lock()
			defer e.mu.Unlock()
			delete(e.sent, id)
		},
	})
	return e
}

func (e *ECDS) onRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	switch {
	case req.GetErrorDetail() != nil:
		// The snapshot cache answers any request whose version differs
		// from the current one, so a NACK (which names the last good
		// version) would get the rejected config back at once, again and
		// again. Marking the rejected version as the one the proxy has
		// makes the cache wait for the next EnvoyConfig instead.
		e.mu.Lock()
		if s, ok := e.sent[id]; ok && s.nonce == req.GetResponseNonce() {
			req.VersionInfo = s.version
		}
		e.mu.Unlock()
		e.log.Warn("a proxy rejected a Wasm filter config", "node", req.GetNode().GetId(), "version", req.GetVersionInfo(),
			"resources", req.GetResourceNames(), "error", req.GetErrorDetail().GetMessage())
		if e.metrics != nil {
			e.metrics.ECDSAcked(true)
		}
	case req.GetResponseNonce() != "":
		if e.metrics != nil {
			e.metrics.ECDSAcked(false)
		}
	}
	return nil
}

// SetEnvoyConfig implements app.EnvoyConfigSink.
func (e *ECDS) SetEnvoyConfig(c app.EnvoyConfig) {
	if c.Version == "" {
		return
	}
	var resources []types.Resource
	for _, f := range c.WasmFilters {
		r, err := WasmExtensionConfig(f)
		if err != nil {
			e.log.Info("Wasm filter not served over ECDS", "filter", f.GetName(), "reason", err.Error())
			continue
		}
		resources = append(resources, r)
	}
	snap, err := cachev3.NewSnapshot(c.Version, map[resourcev3.Type][]types.Resource{resourcev3.ExtensionConfigType: resources})
	if err != nil {
		e.log.Error("building the ECDS snapshot failed", "version", c.Version, "error", err)
		return
	}
	if err := e.cache.SetSnapshot(context.Background(), ecdsNode, snap); err != nil {
		e.log.Error("publishing the ECDS snapshot failed", "version", c.Version, "error", err)
		return
	}
	e.log.Info("Wasm filter configs published", "version", c.Version, "filters", len(resources))
}

// ErrOCIOnly is returned for a filter whose module is only an OCI image:
// Istio's WasmPlugin output serves it, not ECDS.
var ErrOCIOnly = fmt.Errorf("the module is an OCI image only; the WasmPlugin output carries it")

// WasmExtensionConfig is the ECDS resource of one Wasm filter: an HTTP Wasm
// filter whose VM fetches the module over HTTP(S), checked by its SHA-256,
// through the cluster Istio makes for the URL's host
// ("outbound|<port>||<host>", so a ServiceEntry must cover an external
// host).
func WasmExtensionConfig(f *snapshotv1.WasmFilterConfig) (*corev3.TypedExtensionConfig, error) {
	if f.GetName() == "" {
		return nil, fmt.Errorf("no name")
	}
	if f.GetUrl() == "" {
		return nil, ErrOCIOnly
	}
	u, err := url.Parse(f.GetUrl())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Errorf("module URL %q is not an http(s) URL", f.GetUrl())
	}
	if len(f.GetSha256()) != 64 {
		return nil, fmt.Errorf("module sha256 %q is not 64 hex digits", f.GetSha256())
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	vm := &wasmv3.VmConfig{
		VmId:    f.GetName(),
		Runtime: "envoy.wasm.runtime.v8",
		Code: &corev3.AsyncDataSource{Specifier: &corev3.AsyncDataSource_Remote{Remote: &corev3.RemoteDataSource{
			HttpUri: &corev3.HttpUri{
				Uri:              f.GetUrl(),
				HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "outbound|" + port + "||" + strings.TrimSuffix(u.Hostname(), ".")},
				Timeout:          durationpb.New(30 * time.Second),
			},
			Sha256: strings.ToLower(f.GetSha256()),
		}}},
	}
	plugin := &wasmv3.PluginConfig{Name: f.GetName(), RootId: f.GetRootId(), Vm: &wasmv3.PluginConfig_VmConfig{VmConfig: vm}}
	if cfg := f.GetConfigJson(); len(cfg) > 0 {
		if !json.Valid(cfg) {
			return nil, fmt.Errorf("configuration is not valid JSON")
		}
		plugin.Configuration, err = anypb.New(wrapperspb.String(string(cfg)))
		if err != nil {
			return nil, err
		}
	}
	typed, err := anypb.New(&wasmfilterv3.Wasm{Config: plugin})
	if err != nil {
		return nil, err
	}
	return &corev3.TypedExtensionConfig{Name: f.GetName(), TypedConfig: typed}, nil
}

// xdsLogger sends go-control-plane's logs to slog; its debug lines stay
// at debug.
type xdsLogger struct{ l *slog.Logger }

func (x xdsLogger) Debugf(format string, args ...any) {
	x.l.Debug(fmt.Sprintf(format, args...), "source", "xds")
}
func (x xdsLogger) Infof(format string, args ...any) {
	x.l.Debug(fmt.Sprintf(format, args...), "source", "xds")
}
func (x xdsLogger) Warnf(format string, args ...any) {
	x.l.Warn(fmt.Sprintf(format, args...), "source", "xds")
}
func (x xdsLogger) Errorf(format string, args ...any) {
	x.l.Error(fmt.Sprintf(format, args...), "source", "xds")
}
