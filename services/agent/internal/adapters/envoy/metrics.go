package envoy

import (
	"errors"
	"io"
	"log/slog"
	"strings"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/service/metrics/v3"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The Istio standard metrics, as Envoy's metrics service sends them with
// emit_tags_as_labels: the tag-extracted name, the tags as labels.
const (
	istioRequests  = "istio_requests_total"
	istioDurations = "istio_request_duration_milliseconds"
)

// metricsServer is the Envoy Metrics Service (v3): each proxy keeps a
// stream open and sends all its stats at every flush.
type metricsServer struct {
	metricsv3.UnimplementedMetricsServiceServer
	m   *app.RequestMetrics
	log *slog.Logger
}

func (s *metricsServer) StreamMetrics(stream metricsv3.MetricsService_StreamMetricsServer) error {
	proxy := s.m.NewProxy()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&metricsv3.StreamMetricsResponse{})
		}
		if err != nil {
			return err
		}
		counts, durations := RequestMetricsOf(msg.GetEnvoyMetrics())
		if len(counts) > 0 || len(durations) > 0 {
			proxy.Observe(counts, durations)
		}
	}
}

// RequestMetricsOf picks Istio's request count and duration out of a
// proxy's metric families. Other families are ignored.
func RequestMetricsOf(families []*dto.MetricFamily) ([]app.RequestCount, []app.RequestDurations) {
	var counts []app.RequestCount
	var durations []app.RequestDurations
	for _, f := range families {
		name := f.GetName()
		switch {
		case strings.HasSuffix(name, istioRequests) && f.GetType() == dto.MetricType_COUNTER:
			for _, m := range f.GetMetric() {
				counts = append(counts, app.RequestCount{Series: seriesOf(m.GetLabel()), Count: m.GetCounter().GetValue()})
			}
		case strings.HasSuffix(name, istioDurations) && f.GetType() == dto.MetricType_HISTOGRAM:
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				d := app.RequestDurations{Series: seriesOf(m.GetLabel()), Count: h.GetSampleCount(), Sum: h.GetSampleSum() / 1000}
				for _, b := range h.GetBucket() {
					d.Buckets = append(d.Buckets, app.DurationBucket{UpperBound: b.GetUpperBound() / 1000, Count: b.GetCumulativeCount()})
				}
				durations = append(durations, d)
			}
		}
	}
	return counts, durations
}

func seriesOf(labels []*dto.LabelPair) app.RequestSeries {
	var s app.RequestSeries
	var dstName string
	for _, l := range labels {
		v := strings.ToValidUTF8(l.GetValue(), "?")
		switch l.GetName() {
		case "reporter":
			s.Reporter = v
		case "source_workload":
			s.SourceWorkload = v
		case "source_workload_namespace":
			s.SourceNamespace = v
		case "destination_service":
			s.DestinationService = v
		case "destination_service_name":
			dstName = v
		case "response_code":
			s.ResponseCode = v
		}
	}
	if s.DestinationService == "" {
		s.DestinationService = dstName
	}
	return s
}

var seriesLabels = []string{"reporter", "source_workload", "source_workload_namespace", "destination_service", "response_code"}

// RequestMetricsCollector exports the aggregated request metrics.
type RequestMetricsCollector struct {
	m                             *app.RequestMetrics
	requests, durations, overflow *prometheus.Desc
	series                        *prometheus.Desc
}

// NewRequestMetricsCollector returns the Prometheus view of m.
func NewRequestMetricsCollector(m *app.RequestMetrics) *RequestMetricsCollector {
	return &RequestMetricsCollector{
		m: m,
		requests: prometheus.NewDesc("meshplane_agent_envoy_requests_total",
			"Requests reported by the cluster's Envoy proxies (istio_requests_total), by source workload, destination service and response code.", seriesLabels, nil),
		durations: prometheus.NewDesc("meshplane_agent_envoy_request_duration_seconds",
			"Request durations reported by the cluster's Envoy proxies (istio_request_duration_milliseconds).", seriesLabels, nil),
		overflow: prometheus.NewDesc("meshplane_agent_envoy_series_overflow_total",
			"Reports of label sets beyond the series cap, folded into the \"other\" series.", nil, nil),
		series: prometheus.NewDesc("meshplane_agent_envoy_series",
			"Label sets of the re-exported request metrics.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *RequestMetricsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.durations
	ch <- c.overflow
	ch <- c.series
}

// Collect implements prometheus.Collector.
func (c *RequestMetricsCollector) Collect(ch chan<- prometheus.Metric) {
	series, overflow := c.m.Snapshot()
	for s, v := range series {
		labels := []string{s.Reporter, s.SourceWorkload, s.SourceNamespace, s.DestinationService, s.ResponseCode}
		if m, err := prometheus.NewConstMetric(c.requests, prometheus.CounterValue, v.Requests, labels...); err == nil {
			ch <- m
		}
		if v.DurationCount > 0 {
			buckets := make(map[float64]uint64, len(v.Buckets))
			for i, ub := range app.DurationBucketsSeconds {
				buckets[ub] = v.Buckets[i]
			}
			if m, err := prometheus.NewConstHistogram(c.durations, v.DurationCount, v.DurationSum, buckets, labels...); err == nil {
				ch <- m
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.overflow, prometheus.CounterValue, float64(overflow))
	ch <- prometheus.MustNewConstMetric(c.series, prometheus.GaugeValue, float64(len(series)))
}
