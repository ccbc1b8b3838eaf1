package app

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

var reviewsPod = domain.ProxyWorkload{Pod: "reviews-v1-abc", Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}}

func keepAll() EnvoyConfig {
	return EnvoyConfig{Version: "v1", AccessLogPolicies: []*snapshotv1.AccessLogPolicyConfig{{
		Policy:          &commonv1.ObjectRef{Namespace: "ops", Name: "all"},
		WorkloadMatches: []*snapshotv1.AccessLogPolicyConfig_WorkloadMatch{{Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}}},
	}}}
}

func entries(paths ...string) []*observabilityv1.AccessLogEntry {
	var out []*observabilityv1.AccessLogEntry
	for _, p := range paths {
		out = append(out, &observabilityv1.AccessLogEntry{Path: p, ResponseCode: 200})
	}
	return out
}

func paths(es []*observabilityv1.AccessLogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.GetPath())
	}
	return out
}

type recordingALMetrics struct {
	mu                      sync.Mutex
	received, kept, dropped int
}

func (m *recordingALMetrics) AccessLogsReceived(r, k int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.received += r
	m.kept += k
}

func (m *recordingALMetrics) AccessLogsDropped(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropped += n
}
func (m *recordingALMetrics) AccessLogsSent(int, error) {}

func TestAccessLogsKeepsNothingWithoutPolicies(t *testing.T) {
	a := NewAccessLogs(AccessLogsOptions{Cluster: "east"})
	if n := a.Accept(reviewsPod, entries("/a")); n != 0 {
		t.Errorf("kept %d before any EnvoyConfig, want 0", n)
	}
	a.SetEnvoyConfig(keepAll())
	if n := a.Accept(reviewsPod, entries("/a")); n != 1 {
		t.Errorf("kept %d, want 1", n)
	}
	got := a.Recent(10)
	if len(got) != 1 || got[0].GetCluster() != "east" || got[0].GetWorkload().GetName() != "reviews-v1-abc" || got[0].GetWorkload().GetCluster() != "east" {
		t.Errorf("recent = %v, want one entry of east/bookinfo/reviews-v1-abc", got)
	}
	a.SetEnvoyConfig(EnvoyConfig{Version: "v2"})
	if n := a.Accept(reviewsPod, entries("/a")); n != 0 {
		t.Errorf("kept %d after the policies went, want 0", n)
	}
}

func TestAccessLogsRingAndQueueAreBounded(t *testing.T) {
	m := &recordingALMetrics{}
	a := NewAccessLogs(AccessLogsOptions{Cluster: "east", BufferSize: 3, QueueSize: 4, BatchSize: 10, Metrics: m})
	a.SetEnvoyConfig(keepAll())
	a.Accept(reviewsPod, entries("/1", "/2", "/3", "/4", "/5", "/6"))
	if got := paths(a.Recent(10)); !equalStrings(got, []string{"/4", "/5", "/6"}) {
		t.Errorf("ring = %v, want the last three", got)
	}
	if got := paths(a.Recent(2)); !equalStrings(got, []string{"/5", "/6"}) {
		t.Errorf("Recent(2) = %v, want /5 /6", got)
	}
	batch, dropped := a.take(true)
	if got := paths(batch); !equalStrings(got, []string{"/3", "/4", "/5", "/6"}) || dropped != 2 {
		t.Errorf("batch = %v dropped %d, want /3../6 with 2 dropped", got, dropped)
	}
	if m.dropped != 2 || m.received != 6 || m.kept != 6 {
		t.Errorf("metrics = %+v, want 6 received, 6 kept, 2 dropped", m)
	}
	if _, dropped := a.take(true); dropped != 0 {
		t.Errorf("dropped counted twice: %d", dropped)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fakeALSender records batches; failFirst makes its first stream fail on
// the first send.
type fakeALSender struct {
	mu        sync.Mutex
	batches   [][]string
	failFirst bool
	opened    int
}

type fakeALStream struct {
	s    *fakeALSender
	fail bool
}

func (f *fakeALSender) OpenAccessLogs(context.Context) (AccessLogStream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened++
	return &fakeALStream{s: f, fail: f.failFirst && f.opened == 1}, nil
}

func (s *fakeALStream) Send(es []*observabilityv1.AccessLogEntry, _ uint64) error {
	if s.fail {
		return errors.New("stream reset")
	}
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	s.s.batches = append(s.s.batches, paths(es))
	return nil
}

func (s *fakeALStream) Close() error { return nil }

func (f *fakeALSender) sent() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.batches...)
}

func TestAccessLogsRunResendsAFailedBatchOnTheNextSender(t *testing.T) {
	a := NewAccessLogs(AccessLogsOptions{Cluster: "east", BatchSize: 2, FlushInterval: 10 * time.Millisecond, Log: testLogger(t)})
	a.SetEnvoyConfig(keepAll())
	first, second := &fakeALSender{failFirst: true}, &fakeALSender{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, first, second) }()
	a.Accept(reviewsPod, entries("/1", "/2"))
	waitFor(t, 10*time.Second, func() bool { return len(second.sent()) > 0 }, "the failed batch resent on the second sender")
	got := second.sent()
	if len(got) != 1 || !equalStrings(got[0], []string{"/1", "/2"}) {
		t.Errorf("second sender got %v, want the failed batch [/1 /2]", got)
	}
	if len(first.sent()) != 0 {
		t.Errorf("first sender recorded %v, want nothing", first.sent())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil on cancel", err)
	}
}
