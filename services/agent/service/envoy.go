package service

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/envoy"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/files"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
)

// EnvoyServersConfig configures the servers every replica runs for the
// Envoy proxies of its cluster (port 9977).
type EnvoyServersConfig struct {
	// Addr is the gRPC port of the Access Log Service, the Metrics Service
	// and ECDS. Empty turns the servers off.
	Addr string
	// TLSCertFile and TLSKeyFile, when set, make the port take TLS only.
	TLSCertFile, TLSKeyFile string

	AccessLogBuffer        int
	AccessLogQueue         int
	AccessLogBatch         int
	AccessLogFlushInterval time.Duration
	MetricsMaxSeries       int
}

func defaultEnvoyServersConfig() EnvoyServersConfig {
	return EnvoyServersConfig{
		Addr: ":9977", AccessLogBuffer: 1000, AccessLogQueue: 10000, AccessLogBatch: 500,
		AccessLogFlushInterval: time.Second, MetricsMaxSeries: 10000,
	}
}

func (c *EnvoyServersConfig) addFlags(f *platform.Flags) {
	f.String(&c.Addr, "envoy-addr", "address of the gRPC port for the Envoy proxies (Access Log Service, Metrics Service, ECDS); empty turns it off")
	f.String(&c.TLSCertFile, "envoy-tls-cert-file", "server certificate of --envoy-addr; empty serves plaintext, as Envoy's ALS and metrics clusters usually expect inside the pod network")
	f.String(&c.TLSKeyFile, "envoy-tls-key-file", "key of --envoy-tls-cert-file")
	f.Int(&c.AccessLogBuffer, "accesslog-buffer", "recent kept access-log entries shown by /debug/accesslogs")
	f.Int(&c.AccessLogQueue, "accesslog-queue", "kept access-log entries waiting to be sent to the management plane; beyond it the oldest are dropped")
	f.Int(&c.AccessLogBatch, "accesslog-batch", "most access-log entries in one message to the management plane")
	f.Duration(&c.AccessLogFlushInterval, "accesslog-flush-interval", "longest a kept access-log entry waits for its batch to fill")
	f.Int(&c.MetricsMaxSeries, "envoy-metrics-max-series", "most label sets of the re-exported Envoy request metrics; beyond it they are folded into \"other\"")
}

func (c *EnvoyServersConfig) validate() error {
	var errs []error
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			errs = append(errs, fmt.Errorf("--envoy-addr %q must be host:port", c.Addr))
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("--envoy-tls-cert-file and --envoy-tls-key-file go together"))
	}
	for flag, v := range map[string]int{"accesslog-buffer": c.AccessLogBuffer, "accesslog-queue": c.AccessLogQueue, "accesslog-batch": c.AccessLogBatch, "envoy-metrics-max-series": c.MetricsMaxSeries} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", flag))
		}
	}
	if c.AccessLogFlushInterval <= 0 {
		errs = append(errs, errors.New("--accesslog-flush-interval must be positive"))
	}
	return errors.Join(errs...)
}

// WithEnvoyListener serves the 9977 port on ln instead of cfg.Envoy.Addr
// (tests).
func WithEnvoyListener(ln net.Listener) Option { return func(a *Agent) { a.envoyLn = ln } }

// envoyServers is one replica's access-log sink, request metrics and ECDS
// server, and the sink that feeds the first and the last.
type envoyServers struct {
	accessLogs *app.AccessLogs
	requests   *app.RequestMetrics
	ecds       *envoy.ECDS
	sink       app.EnvoyConfigSink
	ln         net.Listener
	tls        *tls.Config
}

// newEnvoyServers builds the 9977 servers; ctx bounds the ECDS streams.
func (a *Agent) newEnvoyServers(ctx context.Context) (*envoyServers, error) {
	c := a.cfg.Envoy
	m, err := newEnvoyMetrics(a.reg)
	if err != nil {
		return nil, err
	}
	s := &envoyServers{
		accessLogs: app.NewAccessLogs(app.AccessLogsOptions{
			Cluster: a.cfg.Cluster, BufferSize: c.AccessLogBuffer, QueueSize: c.AccessLogQueue, BatchSize: c.AccessLogBatch,
			FlushInterval: c.AccessLogFlushInterval, Metrics: m, Log: a.log.With("part", "accesslogs"),
		}),
		requests: app.NewRequestMetrics(c.MetricsMaxSeries),
		ecds:     envoy.NewECDS(ctx, m, a.log.With("part", "ecds")),
	}
	s.sink = app.EnvoyConfigSinks{s.accessLogs, s.ecds}
	if err := a.reg.Register(envoy.NewRequestMetricsCollector(s.requests)); err != nil {
		return nil, err
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--envoy-tls-cert-file: %w", err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	s.ln = a.envoyLn
	if s.ln == nil && c.Addr != "" {
		if s.ln, err = platform.Listen(context.Background(), c.Addr); err != nil {
			return nil, fmt.Errorf("envoy port: %w", err)
		}
	}
	return s, nil
}

// serve serves the 9977 port until ctx ends.
func (s *envoyServers) serve(ctx context.Context, a *Agent) error {
	if s.ln == nil {
		<-ctx.Done()
		return nil
	}
	return envoy.NewServer(envoy.ServerOptions{
		AccessLogs: s.accessLogs, Metrics: s.requests, ECDS: s.ecds, TLS: s.tls, Log: a.log.With("part", "envoy"),
	}).Serve(ctx, s.ln)
}

// forward sends the kept access-log entries to ingest over mTLS, from
// every replica. The certificate is the leader duty's identity once this
// replica has led; before that, the one stored in --state-dir, if any.
// Without one the entries wait in the queue.
func (s *envoyServers) forward(ctx context.Context, a *Agent, certs *certHolder) error {
	var senders []app.AccessLogSender
	for _, addr := range splitList(a.cfg.addr(a.cfg.IngestAddr)) {
		c, err := a.httpClient(a.clientOptions(addr, certs.Certificate))
		if err != nil {
			return fmt.Errorf("access-log ingest client for %s: %w", addr, err)
		}
		senders = append(senders, connectrpc.NewAccessLogSender(ingestv1connect.NewIngestServiceClient(c.c, c.url, c.options()...)))
	}
	return s.accessLogs.Run(ctx, senders...)
}

// debugHandler serves /debug/accesslogs: the recent kept entries as JSON,
// oldest first (?n= limits them).
func (s *envoyServers) debugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 100
		if v := r.URL.Query().Get("n"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 0 {
				http.Error(w, "n must be a non-negative number", http.StatusBadRequest)
				return
			}
		}
		out := []json.RawMessage{}
		for _, e := range s.accessLogs.Recent(n) {
			b, err := protojson.Marshal(e)
			if err != nil {
				continue
			}
			out = append(out, b)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
}

// certHolder is the client certificate of the access-log forwarder.
type certHolder struct {
	dir    string
	leader atomic.Pointer[app.CertificateSource]

	mu       sync.Mutex
	stored   *tls.Certificate
	loadedAt time.Time
}

func (h *certHolder) setLeader(src app.CertificateSource) { h.leader.Store(&src) }

// Certificate implements app.CertificateSource.
func (h *certHolder) Certificate() (*tls.Certificate, error) {
	if src := h.leader.Load(); src != nil {
		if c, err := (*src)(); err == nil {
			return c, nil
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.loadedAt) > time.Minute {
		h.loadedAt = time.Now()
		if cred, err := (files.Credentials{Dir: h.dir}).Load(context.Background()); err == nil && time.Now().Before(cred.NotAfter) {
			if c, err := tls.X509KeyPair(cred.CertPEM, cred.KeyPEM); err == nil {
				h.stored = &c
			}
		}
	}
	if h.stored == nil {
		return nil, errors.New("this replica has no agent certificate yet: it gets one when it first leads")
	}
	return h.stored, nil
}

// envoyMetrics counts what the 9977 servers do.
type envoyMetrics struct {
	received, kept, dropped prometheus.Counter
	sent                    *prometheus.CounterVec
	ecds                    *prometheus.CounterVec
}

var (
	_ app.AccessLogMetrics = (*envoyMetrics)(nil)
	_ envoy.ECDSMetrics    = (*envoyMetrics)(nil)
)

func newEnvoyMetrics(reg prometheus.Registerer) (*envoyMetrics, error) {
	m := &envoyMetrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "meshplane_agent_accesslogs_received_total", Help: "HTTP access-log entries received from Envoy proxies."}),
		kept:     prometheus.NewCounter(prometheus.CounterOpts{Name: "meshplane_agent_accesslogs_kept_total", Help: "Access-log entries that an AccessLogPolicy kept."}),
		dropped:  prometheus.NewCounter(prometheus.CounterOpts{Name: "meshplane_agent_accesslogs_dropped_total", Help: "Kept access-log entries dropped, oldest first, because the queue to the management plane was full."}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_accesslogs_sent_total", Help: "Access-log entries sent to the management plane, by result (ok: sent, error: its batch failed and is sent again).",
		}, []string{"result"}),
		ecds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_ecds_responses_total", Help: "Answers of proxies to ECDS responses (Wasm filter configs), by result (ack, nack).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.received, m.kept, m.dropped, m.sent, m.ecds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *envoyMetrics) AccessLogsReceived(received, kept int) {
	m.received.Add(float64(received))
	m.kept.Add(float64(kept))
}

func (m *envoyMetrics) AccessLogsDropped(n int) { m.dropped.Add(float64(n)) }

func (m *envoyMetrics) AccessLogsSent(n int, err error) {
	if err != nil {
		m.sent.WithLabelValues("error").Add(float64(n))
		return
	}
	m.sent.WithLabelValues("ok").Add(float64(n))
}

func (m *envoyMetrics) ECDSAcked(nack bool) {
	if nack {
		m.ecds.WithLabelValues("nack").Inc()
		return
	}
	m.ecds.WithLabelValues("ack").Inc()
}

// envoyConfigSinks is the 9977 servers' sink, followed by the one a test
// plugged in with WithEnvoyConfigSink.
func envoyConfigSinks(servers, extra app.EnvoyConfigSink) app.EnvoyConfigSink {
	if extra == nil {
		return servers
	}
	return app.EnvoyConfigSinks{servers, extra}
}
