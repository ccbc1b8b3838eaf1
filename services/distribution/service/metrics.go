package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	watchers    *prometheus.GaugeVec
	sentBytes   *prometheus.HistogramVec
	deltas      *prometheus.CounterVec
	deltaSaved  *prometheus.CounterVec
	refused     *prometheus.CounterVec
	acks        *prometheus.CounterVec
	ackRefusals *prometheus.CounterVec
}

var _ app.Metrics = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer, acks ackLister, log *slog.Logger) (*metrics, error) {
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
		deltas: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_distribution_deltas_sent_total",
			Help: "Deltas sent instead of whole output snapshots, by cluster.",
		}, []string{"cluster"}),
		deltaSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_distribution_delta_bytes_saved_total",
			Help: "Bytes not sent because a delta went out instead of the whole snapshot, by cluster.",
		}, []string{"cluster"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_distribution_snapshots_refused_total",
			Help: "Output snapshots not sent because they exceed --max-send-bytes, by cluster.",
		}, []string{"cluster"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_distribution_acks_total",
			Help: "Acknowledgements received by this replica, by cluster.",
		}, []string{"cluster"}),
		ackRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_distribution_ack_refusals_total",
			Help: "Acknowledgements refused and not recorded, by cluster and reason: not-sent (a version never sent to the cluster, or not among the last ones) or too-many-results (more results than the output holds).",
		}, []string{"cluster", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.watchers, m.sentBytes, m.deltas, m.deltaSaved, m.refused, m.acks, m.ackRefusals, newAckCollector(acks, log)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) WatchStarted(c string)        { m.watchers.WithLabelValues(c).Inc() }
func (m *metrics) WatchEnded(c string)          { m.watchers.WithLabelValues(c).Dec() }
func (m *metrics) SnapshotSent(c string, b int) { m.sentBytes.WithLabelValues(c).Observe(float64(b)) }
func (m *metrics) DeltaSent(c string, b, full int) {
	m.sentBytes.WithLabelValues(c).Observe(float64(b))
	m.deltas.WithLabelValues(c).Inc()
	m.deltaSaved.WithLabelValues(c).Add(float64(full - b))
}
func (m *metrics) SnapshotRefused(c string, _ int) {
	m.refused.WithLabelValues(c).Inc()
}
func (m *metrics) Acked(c string, _ int) { m.acks.WithLabelValues(c).Inc() }
func (m *metrics) AckRefused(c, reason string) {
	m.ackRefusals.WithLabelValues(c, reason).Inc()
}

// ackLister is Distributor.ListAcks.
type ackLister func(ctx context.Context) ([]app.AckRecord, map[string]string, error)

// ackCollector reports the ack state from the store at scrape time, so that
// every replica reports the same values whichever replica received the
// acks.
type ackCollector struct {
	list        ackLister
	log         *slog.Logger
	behind      *prometheus.Desc
	applyErrors *prometheus.Desc
	up          *prometheus.Desc
}

func newAckCollector(list ackLister, log *slog.Logger) *ackCollector {
	return &ackCollector{
		list: list, log: log,
		behind: prometheus.NewDesc("meshplane_distribution_versions_behind",
			"1 when the cluster has not acknowledged the newest output version published for it, else 0. "+
				"Versions are content hashes, so intermediate versions are not counted.", []string{"cluster"}, nil),
		applyErrors: prometheus.NewDesc("meshplane_distribution_apply_errors",
			"Objects rejected or in conflict in the cluster's latest acknowledged version.", []string{"cluster"}, nil),
		up: prometheus.NewDesc("meshplane_distribution_ack_store_up",
			"1 when the ack state could be read from the store at this scrape.", nil, nil),
	}
}

func (c *ackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.behind
	ch <- c.applyErrors
	ch <- c.up
}

func (c *ackCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, latest, err := c.list(ctx)
	if err != nil {
		c.log.Warn("metrics: reading ack state failed", "error", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, r := range recs {
		behind := 0.0
		if v, ok := latest[r.Cluster]; ok && v != r.Version {
			behind = 1
		}
		ch <- prometheus.MustNewConstMetric(c.behind, prometheus.GaugeValue, behind, r.Cluster)
		ch <- prometheus.MustNewConstMetric(c.applyErrors, prometheus.GaugeValue, float64(r.ApplyErrors), r.Cluster)
	}
}
