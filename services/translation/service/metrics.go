package service

import (
	"time"

	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	duration      *prometheus.HistogramVec
	outputObjects *prometheus.GaugeVec
	outputBytes   *prometheus.GaugeVec
	publishErrors *prometheus.CounterVec
	safeMode      prometheus.Gauge
	safeWaiting   prometheus.Gauge
	missing       prometheus.Gauge
	lkgLoaded     prometheus.Gauge
	lkgPending    prometheus.Gauge
	encodingCache prometheus.Gauge
}

var _ app.Metrics = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "meshplane_translation_duration_seconds",
			Help:    "Time to translate every cluster's inputs, by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"result"}),
		outputObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_translation_output_objects",
			Help: "Objects in the latest output snapshot, by cluster.",
		}, []string{"cluster"}),
		outputBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_translation_output_bytes",
			Help: "Encoded size of the latest output snapshot, by cluster.",
		}, []string{"cluster"}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_translation_publish_errors_total",
			Help: "Output snapshots that could not be published, by cluster.",
		}, []string{"cluster"}),
		safeMode: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_translation_safe_mode",
			Help: "1 while safe mode holds publishing back after a start or a store loss, else 0.",
		}),
		safeWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_translation_safe_mode_clusters_waiting",
			Help: "Registered clusters that safe mode waits for to report an input.",
		}),
		missing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_translation_clusters_missing",
			Help: "Expected clusters (KubernetesClusters in the management cluster) with no input since translation started; outputs built meanwhile are incomplete and agents hold their deletions.",
		}),
		lkgLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_translation_last_good_loaded",
			Help: "1 once the last valid versions kept in the management cluster have been read (publishing waits for them, at most the safe-start window), else 0.",
		}),
		lkgPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_translation_last_good_pending_writes",
			Help: "Changes to the last valid versions not yet written to the management cluster (retried).",
		}),
		encodingCache: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshplane_translation_encoding_cache_bytes",
			Help: "Bytes of the last published outputs' encodings kept so that the next versions copy their unchanged objects (--encoding-cache-mib bounds it).",
		}),
	}
	for _, c := range []prometheus.Collector{m.duration, m.outputObjects, m.outputBytes, m.publishErrors, m.safeMode, m.safeWaiting, m.lkgLoaded, m.lkgPending, m.missing, m.encodingCache} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) ObserveTranslation(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.duration.WithLabelValues(result).Observe(d.Seconds())
}

func (m *metrics) ObserveOutput(cluster string, objects, bytes int) {
	m.outputObjects.WithLabelValues(cluster).Set(float64(objects))
	m.outputBytes.WithLabelValues(cluster).Set(float64(bytes))
}

func (m *metrics) ObservePublishError(cluster string) {
	m.publishErrors.WithLabelValues(cluster).Inc()
}

func (m *metrics) SetSafeMode(on bool, waiting int) {
	v := 0.0
	if on {
		v = 1
	}
	m.safeMode.Set(v)
	m.safeWaiting.Set(float64(waiting))
}

func (m *metrics) SetMissing(clusters int) { m.missing.Set(float64(clusters)) }

func (m *metrics) SetLastGood(loaded bool, pending int) {
	v := 0.0
	if loaded {
		v = 1
	}
	m.lkgLoaded.Set(v)
	m.lkgPending.Set(float64(pending))
}

func (m *metrics) SetEncodingCache(bytes int64) { m.encodingCache.Set(float64(bytes)) }
