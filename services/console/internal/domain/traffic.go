package domain

import (
	"maps"
	"slices"
	"strings"
	"time"

	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
)

// TrafficWindow counts outbound requests and 5xx responses per source
// workload and host in one-second buckets, over a sliding window of at most
// Max. Memory is bounded by Max seconds times the pairs seen in them.
type TrafficWindow struct {
	max     time.Duration
	buckets map[int64]map[trafficKey]*[2]uint64
}

type trafficKey struct {
	src  meshview.Ref
	host string
}

// NewTrafficWindow keeps up to max of counts.
func NewTrafficWindow(max time.Duration) *TrafficWindow {
	return &TrafficWindow{max: max, buckets: map[int64]map[trafficKey]*[2]uint64{}}
}

// Add counts the outbound entries, at the time each started.
func (w *TrafficWindow) Add(entries []*observabilityv1.AccessLogEntry) {
	for _, e := range entries {
		if !strings.EqualFold(e.GetDirection(), "outbound") || e.GetAuthority() == "" {
			continue
		}
		sec := e.GetStartTime().AsTime().Unix()
		b := w.buckets[sec]
		if b == nil {
			b = map[trafficKey]*[2]uint64{}
			w.buckets[sec] = b
		}
		wl := e.GetWorkload()
		k := trafficKey{src: meshview.Ref{Name: wl.GetName(), Namespace: wl.GetNamespace(), Cluster: cmpOr(wl.GetCluster(), e.GetCluster())}, host: e.GetAuthority()}
		c := b[k]
		if c == nil {
			c = new([2]uint64)
			b[k] = c
		}
		c[0]++
		if e.GetResponseCode() >= 500 {
			c[1]++
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Prune drops the buckets older than Max before now.
func (w *TrafficWindow) Prune(now time.Time) {
	oldest := now.Add(-w.max).Unix()
	for sec := range w.buckets {
		if sec < oldest {
			delete(w.buckets, sec)
		}
	}
}

// Counts sums the buckets in (now-window, now], window bounded by Max.
func (w *TrafficWindow) Counts(now time.Time, window time.Duration) []TrafficCount {
	window = min(window, w.max)
	from, to := now.Add(-window).Unix(), now.Unix()
	sum := map[trafficKey]*[2]uint64{}
	for sec, b := range w.buckets {
		if sec <= from || sec > to {
			continue
		}
		for k, c := range b {
			s := sum[k]
			if s == nil {
				s = new([2]uint64)
				sum[k] = s
			}
			s[0] += c[0]
			s[1] += c[1]
		}
	}
	keys := slices.SortedFunc(maps.Keys(sum), func(a, b trafficKey) int {
		return strings.Compare(a.src.Cluster+"/"+a.src.Namespace+"/"+a.src.Name+"/"+a.host, b.src.Cluster+"/"+b.src.Namespace+"/"+b.src.Name+"/"+b.host)
	})
	out := make([]TrafficCount, 0, len(keys))
	for _, k := range keys {
		out = append(out, TrafficCount{Source: k.src, Host: k.host, Requests: sum[k][0], Errors: sum[k][1]})
	}
	return out
}
