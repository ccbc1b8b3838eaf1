package app

import (
	"sync"
)

// RequestSeries is one label set of the re-exported request metrics.
type RequestSeries struct {
	// Reporter is "source" or "destination": Istio counts a request on
	// both sides, so the two are kept apart rather than summed.
	Reporter           string
	SourceWorkload     string
	SourceNamespace    string
	DestinationService string
	ResponseCode       string
}

// OtherSeries is what a series beyond the cardinality cap is folded into.
const OtherSeries = "other"

// DurationBucketsSeconds are the upper bounds of the re-exported duration
// histogram: Istio's default buckets for istio_request_duration_milliseconds,
// in seconds.
var DurationBucketsSeconds = []float64{0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600}

// RequestCount is one proxy's cumulative request count for a series.
type RequestCount struct {
	Series RequestSeries
	Count  float64
}

// DurationBucket is a cumulative count of requests at most UpperBound
// seconds long.
type DurationBucket struct {
	UpperBound float64
	Count      uint64
}

// RequestDurations is one proxy's cumulative duration histogram for a
// series.
type RequestDurations struct {
	Series  RequestSeries
	Buckets []DurationBucket
	Count   uint64
	Sum     float64
}

// SeriesValues are the aggregated values of one series: Buckets are
// cumulative counts at DurationBucketsSeconds.
type SeriesValues struct {
	Requests      float64
	Buckets       []uint64
	DurationCount uint64
	DurationSum   float64
}

// RequestMetrics sums what every proxy of the cluster reports, as counters
// that only go up. Proxies report cumulative values (Envoy's metrics service
// default); each proxy's increase since its previous report is added, and a
// value that went down (a restarted proxy) counts from zero. The number of
// series is capped: a new label set beyond the cap is folded into the
// "other" series, and the folded reports are counted.
type RequestMetrics struct {
	maxSeries int

	mu       sync.Mutex
	series   map[RequestSeries]*SeriesValues
	overflow uint64
}

// NewRequestMetrics returns an aggregate capped at maxSeries label sets
// (10,000 when maxSeries is not positive).
func NewRequestMetrics(maxSeries int) *RequestMetrics {
	if maxSeries <= 0 {
		maxSeries = 10000
	}
	return &RequestMetrics{maxSeries: maxSeries, series: map[RequestSeries]*SeriesValues{}}
}

// Snapshot copies the aggregated series and the overflow count.
func (m *RequestMetrics) Snapshot() (map[RequestSeries]SeriesValues, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[RequestSeries]SeriesValues, len(m.series))
	for k, v := range m.series {
		c := *v
		c.Buckets = append([]uint64(nil), v.Buckets...)
		out[k] = c
	}
	return out, m.overflow
}

// values returns the aggregate of s, folding s into "other" beyond the cap.
// m.mu is held.
func (m *RequestMetrics) values(s RequestSeries) *SeriesValues {
	if v, ok := m.series[s]; ok {
		return v
	}
	if len(m.series) >= m.maxSeries {
		m.overflow++
		s = RequestSeries{Reporter: s.Reporter, SourceWorkload: OtherSeries, SourceNamespace: OtherSeries, DestinationService: OtherSeries, ResponseCode: OtherSeries}
		if v, ok := m.series[s]; ok {
			return v
		}
	}
	v := &SeriesValues{Buckets: make([]uint64, len(DurationBucketsSeconds))}
	m.series[s] = v
	return v
}

// ProxyRequestMetrics is the state of one proxy's metrics stream: its
// previous report of each series.
type ProxyRequestMetrics struct {
	m         *RequestMetrics
	requests  map[RequestSeries]float64
	durations map[RequestSeries]*proxyDurations
}

type proxyDurations struct {
	buckets []uint64
	count   uint64
	sum     float64
}

// NewProxy starts the state of one proxy's stream.
func (m *RequestMetrics) NewProxy() *ProxyRequestMetrics {
	return &ProxyRequestMetrics{m: m, requests: map[RequestSeries]float64{}, durations: map[RequestSeries]*proxyDurations{}}
}

// Observe adds one report of the proxy.
func (p *ProxyRequestMetrics) Observe(counts []RequestCount, durations []RequestDurations) {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	for _, c := range counts {
		last, seen := p.requests[c.Series]
		if !seen && len(p.requests) >= 2*p.m.maxSeries {
			// A proxy holds at most twice the cap of previous values.
			p.m.overflow++
			continue
		}
		delta := c.Count - last
		if delta < 0 {
			delta = c.Count
		}
		p.requests[c.Series] = c.Count
		p.m.values(c.Series).Requests += delta
	}
	for _, d := range durations {
		last, seen := p.durations[d.Series]
		if !seen {
			if len(p.durations) >= 2*p.m.maxSeries {
				p.m.overflow++
				continue
			}
			last = &proxyDurations{buckets: make([]uint64, len(DurationBucketsSeconds))}
			p.durations[d.Series] = last
		}
		cur := rebucket(d.Buckets)
		reset := d.Count < last.count
		if reset {
			last = &proxyDurations{buckets: make([]uint64, len(DurationBucketsSeconds))}
		}
		v := p.m.values(d.Series)
		for i := range cur {
			if cur[i] >= last.buckets[i] {
				v.Buckets[i] += cur[i] - last.buckets[i]
			}
		}
		v.DurationCount += d.Count - last.count
		if d.Sum >= last.sum {
			v.DurationSum += d.Sum - last.sum
		}
		p.durations[d.Series] = &proxyDurations{buckets: cur, count: d.Count, sum: d.Sum}
	}
}

// rebucket maps a proxy's cumulative buckets onto DurationBucketsSeconds:
// the count at each bound is the proxy's count at its largest bound not
// above it, exact when the proxy uses Istio's default buckets.
func rebucket(in []DurationBucket) []uint64 {
	out := make([]uint64, len(DurationBucketsSeconds))
	j := 0
	var c uint64
	for i, ub := range DurationBucketsSeconds {
		for j < len(in) && in[j].UpperBound <= ub*(1+1e-9) {
			c = max(c, in[j].Count)
			j++
		}
		out[i] = c
	}
	return out
}
