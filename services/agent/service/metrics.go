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
	connected   *prometheus.GaugeVec
}

var _ app.Metrics = (*metrics)(nil)

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
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_agent_connected", Help: "1 while the push or watch stream is open.",
		}, []string{"stream"}),
	}
	for _, c := range []prometheus.Collector{m.pushes, m.pushBytes, m.applied, m.applyErrors, m.connected} {
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

func (m *metrics) Connected(stream string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.connected.WithLabelValues(stream).Set(v)
}
