package service

import (
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	pushes      *prometheus.CounterVec
	pushBytes   prometheus.Histogram
	applied     *prometheus.CounterVec
	applyErrors prometheus.Gauge
	held        prometheus.Gauge
	connected   *prometheus.GaugeVec
	drift       *prometheus.CounterVec

	caIssued    *prometheus.CounterVec
	caFailures  *prometheus.CounterVec
	caConflicts prometheus.Gauge
	caExpiry    *prometheus.GaugeVec

	rotations   *prometheus.CounterVec
	podsBounced *prometheus.CounterVec
}

var (
	_ app.Metrics         = (*metrics)(nil)
	_ app.CACertsMetrics  = (*metrics)(nil)
	_ app.RotationMetrics = (*metrics)(nil)
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_pushes_total", Help: "Input snapshots pushed, by result.",
		}, []string{"result"}),
		pushBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "meshplane_agent_push_bytes", Help: "Size of input snapshots pushed.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10),
		}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_objects_total", Help: "Objects applied, failed and deleted.",
		}, []string{"outcome"}),
		applyErrors: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_agent_apply_errors", Help: "Objects that failed in the latest apply.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_agent_held_deletions",
			Help: "Owned objects the latest output no longer holds but the agent kept, because that output was built without some expected cluster's input; deleted once a complete output arrives.",
		}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_agent_connected", Help: "1 while the push or watch stream is open.",
		}, []string{"stream"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_drift_corrected_total",
			Help: "Owned objects put back after someone else changed or deleted them, by kind.",
		}, []string{"kind"}),
		caIssued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_cacerts_issued_total", Help: "Istio intermediate CAs (cacerts Secrets) written, by reason.",
		}, []string{"reason"}),
		caFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_cacerts_failures_total", Help: "Failed attempts to issue an Istio intermediate CA, by stage.",
		}, []string{"stage"}),
		caConflicts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_agent_cacerts_conflicts", Help: "cacerts Secrets left alone because the user owns them.",
		}),
		caExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_agent_cacerts_expiry_timestamp_seconds", Help: "When each held Istio intermediate CA expires (Unix time).",
		}, []string{"namespace", "name"}),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_cacerts_rotations_total", Help: "Istio CA rotations (pods restarted after a new intermediate) that ended, by result: completed, superseded or abandoned.",
		}, []string{"result"}),
		podsBounced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_agent_pods_bounced_total", Help: "Pods deleted to restart them on a new Istio intermediate CA, by phase: istiod, gateways or workloads.",
		}, []string{"phase"}),
	}
	for _, c := range []prometheus.Collector{m.pushes, m.pushBytes, m.applied, m.applyErrors, m.held, m.connected, m.drift, m.caIssued, m.caFailures, m.caConflicts, m.caExpiry, m.rotations, m.podsBounced} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) Pushed(bytes int, err error) {
	if err != nil {
		m.pushes.WithLabelValues("error").Inc()
		return
	}
	m.pushes.WithLabelValues("ok").Inc()
	m.pushBytes.Observe(float64(bytes))
}

func (m *metrics) Applied(_ string, applied, failed, deleted int) {
	m.applied.WithLabelValues("applied").Add(float64(applied))
	m.applied.WithLabelValues("failed").Add(float64(failed))
	m.applied.WithLabelValues("deleted").Add(float64(deleted))
	m.applyErrors.Set(float64(failed))
}

func (m *metrics) HeldDeletions(n int) { m.held.Set(float64(n)) }

func (m *metrics) DriftCorrected(kind string) { m.drift.WithLabelValues(kind).Inc() }

func (m *metrics) Connected(stream string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.connected.WithLabelValues(stream).Set(v)
}

func (m *metrics) CACertsIssued(reason string) { m.caIssued.WithLabelValues(reason).Inc() }

func (m *metrics) CACertsFailed(stage string) { m.caFailures.WithLabelValues(stage).Inc() }

func (m *metrics) CACertsObserved(states []app.CACertsStatus) {
	conflicts := 0
	m.caExpiry.Reset()
	for _, s := range states {
		if s.State == app.CAStateConflict {
			conflicts++
		}
		if !s.ExpiresAt.IsZero() {
			m.caExpiry.WithLabelValues(s.Namespace, s.Name).Set(float64(s.ExpiresAt.Unix()))
		}
	}
	m.caConflicts.Set(float64(conflicts))
}

func (m *metrics) RotationFinished(result string) { m.rotations.WithLabelValues(result).Inc() }

func (m *metrics) PodsBounced(phase string, n int) {
	m.podsBounced.WithLabelValues(phase).Add(float64(n))
}
