package service

import (
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	watchers    *prometheus.GaugeVec
	sentBytes   *prometheus.HistogramVec
	applyErrors *prometheus.GaugeVec
	acks        *prometheus.CounterVec
}

var _ app.Metrics = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_distribution_pull_clients_connected",
			Help: "Agents watching on this replica, by cluster.",
		}, []string{"cluster"}),
		sentBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "meshplane_distribution_snapshot_bytes",
			Help:    "Size of output snapshots sent, by cluster.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10),
		}, []string{"cluster"}),
		applyErrors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_distribution_apply_errors",
			Help: "Objects that failed to apply in the latest acknowledged version, by cluster.",
		}, []string{"cluster"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_distribution_acks_total",
			Help: "Acknowledgements received, by cluster.",
		}, []string{"cluster"}),
	}
	for _, c := range []prometheus.Collector{m.watchers, m.sentBytes, m.applyErrors, m.acks} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) WatchStarted(c string)        { m.watchers.WithLabelValues(c).Inc() }
func (m *metrics) WatchEnded(c string)          { m.watchers.WithLabelValues(c).Dec() }
func (m *metrics) SnapshotSent(c string, b int) { m.sentBytes.WithLabelValues(c).Observe(float64(b)) }
func (m *metrics) Acked(c string, applyErrors int) {
	m.acks.WithLabelValues(c).Inc()
	m.applyErrors.WithLabelValues(c).Set(float64(applyErrors))
}
