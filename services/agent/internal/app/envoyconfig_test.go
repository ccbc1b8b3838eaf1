package app

import (
	"sync"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

type recordingEnvoySink struct {
	mu  sync.Mutex
	got []EnvoyConfig
}

func (r *recordingEnvoySink) SetEnvoyConfig(c EnvoyConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, c)
}

func TestSyncerHandsTheEnvoyConfigOn(t *testing.T) {
	sink := &recordingEnvoySink{}
	s := NewSyncer(newFakeRelay(), newFakeApplier(), nil, testLogger(t), WithEnvoyConfigReplicator(LocalEnvoyConfig{Sink: sink}))
	snap := output(object("VirtualService", "reviews"))
	snap.WasmFilters = []*snapshotv1.WasmFilterConfig{{Name: "meshplane.bookinfo.p.f", Url: "https://example.com/f.wasm"}}
	snap.AccessLogPolicies = []*snapshotv1.AccessLogPolicyConfig{{Policy: &commonv1.ObjectRef{Namespace: "bookinfo", Name: "errors"}}}
	if !s.Apply(t.Context(), snap) {
		t.Fatal("Apply failed")
	}
	if len(sink.got) != 1 {
		t.Fatalf("sink got %d configs, want 1", len(sink.got))
	}
	c := sink.got[0]
	if c.Version != snap.GetVersion() || len(c.WasmFilters) != 1 || len(c.AccessLogPolicies) != 1 {
		t.Errorf("sink got %+v, want version %s with one filter and one policy", c, snap.GetVersion())
	}
}
