package app

import (
	"fmt"
	"testing"
)

func series(src, dst, code string) RequestSeries {
	return RequestSeries{Reporter: "destination", SourceWorkload: src, SourceNamespace: "bookinfo", DestinationService: dst, ResponseCode: code}
}

func TestRequestMetricsSumsIncreasesOfEveryProxy(t *testing.T) {
	m := NewRequestMetrics(0)
	a, b := m.NewProxy(), m.NewProxy()
	s := series("productpage-v1", "reviews.bookinfo.svc.cluster.local", "200")
	a.Observe([]RequestCount{{s, 10}}, []RequestDurations{{Series: s, Buckets: []DurationBucket{{0.005, 4}, {0.01, 10}}, Count: 10, Sum: 0.05}})
	a.Observe([]RequestCount{{s, 15}}, []RequestDurations{{Series: s, Buckets: []DurationBucket{{0.005, 6}, {0.01, 15}}, Count: 15, Sum: 0.08}})
	b.Observe([]RequestCount{{s, 7}}, nil)
	// b restarted: its count went down, so it counts from zero.
	b.Observe([]RequestCount{{s, 2}}, nil)
	got, overflow := m.Snapshot()
	v := got[s]
	if v.Requests != 24 {
		t.Errorf("requests = %v, want 15+7+2 = 24", v.Requests)
	}
	if v.DurationCount != 15 || v.DurationSum < 0.0799 || v.DurationSum > 0.0801 {
		t.Errorf("durations = %d / %v, want 15 / 0.08", v.DurationCount, v.DurationSum)
	}
	// Bounds 0.005 and 0.01 are the 3rd and 4th default buckets.
	if v.Buckets[1] != 0 || v.Buckets[2] != 6 || v.Buckets[3] != 15 || v.Buckets[len(v.Buckets)-1] != 15 {
		t.Errorf("buckets = %v, want 0 at 1ms, 6 at 5ms, 15 from 10ms on", v.Buckets)
	}
	if overflow != 0 {
		t.Errorf("overflow = %d, want 0", overflow)
	}
}

func TestRequestMetricsCapsTheSeries(t *testing.T) {
	m := NewRequestMetrics(5)
	p := m.NewProxy()
	var counts []RequestCount
	for i := range 8 {
		counts = append(counts, RequestCount{series(fmt.Sprintf("w%d", i), "reviews", "200"), 1})
	}
	p.Observe(counts, nil)
	got, overflow := m.Snapshot()
	if len(got) != 6 {
		t.Errorf("series = %d, want the cap (5) plus other", len(got))
	}
	other := RequestSeries{Reporter: "destination", SourceWorkload: OtherSeries, SourceNamespace: OtherSeries, DestinationService: OtherSeries, ResponseCode: OtherSeries}
	if got[other].Requests != 3 {
		t.Errorf("other = %v, want the 3 folded requests", got[other].Requests)
	}
	if overflow != 3 {
		t.Errorf("overflow = %d, want 3", overflow)
	}
}
