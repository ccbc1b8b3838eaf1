package service

import (
	"github.com/meshplane/meshplane/services/ingest/internal/adapters/connectrpc"
	ingestredis "github.com/meshplane/meshplane/services/ingest/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

// AccessLogOptions bound the access-log buffers of a replica.
type AccessLogOptions = app.AccessLogOptions

// DefaultAccessLogOptions returns the defaults.
func DefaultAccessLogOptions() AccessLogOptions { return app.DefaultAccessLogOptions() }

func (c *Config) addAccessLogFlags() {
	c.flags.Int(&c.AccessLogs.BufferSize, "accesslog-buffer", "access-log entries each replica keeps for `meshctl accesslogs` tails")
	c.flags.Int(&c.AccessLogs.WatcherQueue, "accesslog-watcher-queue", "access-log entries a follower may fall behind before its oldest are dropped")
	c.flags.Int(&c.AccessLogs.MaxBatch, "accesslog-max-batch", "most access-log entries one push message may carry")
	c.flags.Int(&c.AccessLogs.MaxEntryBytes, "accesslog-max-entry-bytes", "largest access-log entry kept, in bytes (protobuf size); larger ones are dropped and counted")
}

// buildAccessLogs sets up the access-log buffer, shared with the other
// replicas over Redis pub/sub when there is Redis.
func (s *Service) buildAccessLogs(cfg Config, d deps) error {
	m, err := newAccessLogMetrics(d.reg)
	if err != nil {
		return err
	}
	var bus app.AccessLogBus
	if s.redis != nil {
		bus = ingestredis.NewAccessLogBus(s.redis, cfg.Install, cfg.Replica, s.log)
	} else {
		s.log.Info("access logs are shared with no other replica: no Redis")
	}
	s.logs, err = app.NewAccessLogs(cfg.AccessLogs, bus, m, s.log)
	if err != nil {
		return err
	}
	s.logsHandler = connectrpc.NewAccessLogHandler(s.logs, s.log)
	return nil
}

type accessLogMetrics struct {
	received *prometheus.CounterVec
	dropped  *prometheus.CounterVec
}

func newAccessLogMetrics(reg prometheus.Registerer) (*accessLogMetrics, error) {
	m := &accessLogMetrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_ingest_accesslogs_received_total",
			Help: "Access-log entries accepted from agents by this replica, by cluster.",
		}, []string{"cluster"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_ingest_accesslogs_dropped_total",
			Help: "Access-log entries lost, by cluster and reason: agent (the agent's queue was full), too_large (refused here), slow_watcher (a follower fell behind).",
		}, []string{"cluster", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.received, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *accessLogMetrics) AccessLogsReceived(cluster string, n int) {
	m.received.WithLabelValues(cluster).Add(float64(n))
}

func (m *accessLogMetrics) AccessLogsDropped(cluster, reason string, n int) {
	m.dropped.WithLabelValues(cluster, reason).Add(float64(n))
}
