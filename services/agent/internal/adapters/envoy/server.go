// Package envoy holds the servers that every agent replica runs for the
// Envoy proxies of its cluster on one gRPC port (9977): the Access Log
// Service sink, the Metrics Service sink and the ECDS server of the Wasm
// filters.
package envoy

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	extensionv3 "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// Server is the gRPC server of the 9977 port.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	log    *slog.Logger
}

// ServerOptions configures the server; nil sinks are not served.
type ServerOptions struct {
	AccessLogs *app.AccessLogs
	Metrics    *app.RequestMetrics
	ECDS       *ECDS
	// TLS, when set, makes the server take TLS connections only.
	TLS *tls.Config
	Log *slog.Logger
}

// NewServer builds the server with the given sinks registered.
func NewServer(o ServerOptions) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	opts := []grpc.ServerOption{
		// Envoy's gRPC clients keep their streams open for ever and may
		// send keepalive pings; a ping every 10 s is allowed.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.MaxRecvMsgSize(16 << 20),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	s := &Server{grpc: grpc.NewServer(opts...), health: health.NewServer(), log: o.Log}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	if o.AccessLogs != nil {
		accesslogv3.RegisterAccessLogServiceServer(s.grpc, &accessLogServer{sink: o.AccessLogs, log: o.Log})
		s.health.SetServingStatus(accesslogv3.AccessLogService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if o.Metrics != nil {
		metricsv3.RegisterMetricsServiceServer(s.grpc, &metricsServer{m: o.Metrics, log: o.Log})
		s.health.SetServingStatus(metricsv3.MetricsService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	if o.ECDS != nil {
		extensionv3.RegisterExtensionConfigDiscoveryServiceServer(s.grpc, o.ECDS.server)
		s.health.SetServingStatus(extensionv3.ExtensionConfigDiscoveryService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	return s
}

// Serve serves on ln until ctx ends, then stops gracefully: open streams
// get a few seconds to finish before they are cut.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		<-ctx.Done()
		s.health.Shutdown()
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			// Envoy's log and metrics streams never end by themselves.
			s.grpc.Stop()
			<-stopped
		}
	}()
	s.log.Info("envoy servers listening", "addr", ln.Addr().String())
	if err := s.grpc.Serve(ln); err != nil && ctx.Err() == nil {
		return fmt.Errorf("envoy servers on %s: %w", ln.Addr(), err)
	}
	return nil
}
