package service

import (
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	connected *prometheus.GaugeVec
	pushes    *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	bytes     *prometheus.HistogramVec
}

var _ app.Metrics = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_ingest_push_clients_connected",
			Help: "Agents with an open push stream on this replica, by cluster.",
		}, []string{"cluster"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_ingest_pushes_total",
			Help: "Input snapshots received, by cluster and result.",
		}, []string{"cluster", "result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_ingest_push_refusals_total",
			Help: "Input snapshots refused, by cluster and reason: the per-cluster limit exceeded (destinations, workloads, meshes, policies, istio-objects), invalid or reserved-cluster. The last accepted snapshot stays in use.",
		}, []string{"cluster", "reason"}),
		bytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "meshplane_ingest_snapshot_bytes",
			Help:    "Size of input snapshots received, by cluster.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10),
		}, []string{"cluster"}),
	}
	for _, c := range []prometheus.Collector{m.connected, m.pushes, m.refusals, m.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) PushReceived(cluster string, bytes int, err error) {
	result := "ok"
	if err != nil {
		result = "refused"
	}
	m.pushes.WithLabelValues(cluster, result).Inc()
	m.bytes.WithLabelValues(cluster).Observe(float64(bytes))
}

func (m *metrics) PushRefused(cluster, reason string) {
	m.refusals.WithLabelValues(cluster, reason).Inc()
}

func (m *metrics) ClientConnected(cluster string)    { m.connected.WithLabelValues(cluster).Inc() }
func (m *metrics) ClientDisconnected(cluster string) { m.connected.WithLabelValues(cluster).Dec() }

// staleCollector reports meshplane_ingest_cluster_stale{cluster} at scrape
// time from the ingestor's view, so that it follows the clock without a
// loop updating it.
type staleCollector struct {
	in   *app.Ingestor
	desc *prometheus.Desc
}

func newStaleCollector(in *app.Ingestor) *staleCollector {
	return &staleCollector{in: in, desc: prometheus.NewDesc(
		"meshplane_ingest_cluster_stale",
		"1 when the cluster's agent is not connected to this replica and its last push is older than the stale window; its snapshot stays in use.",
		[]string{"cluster"}, nil)}
}

func (c *staleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *staleCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.in.Clusters() {
		v := 0.0
		if st.Stale {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, st.Cluster)
	}
}
