package app_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func TestLimitsCheck(t *testing.T) {
	l := app.Limits{Destinations: 3, Workloads: 3, Meshes: 1, Policies: 2, IstioObjects: 2}
	for _, tc := range []struct {
		name   string
		counts snapshots.InputCounts
		// limit and kind of the LimitError; "" for none.
		limit, kind string
	}{
		{name: "everything at its limit", counts: snapshots.InputCounts{Destinations: 3, Workloads: 3, Meshes: 1, TrafficPolicies: 2, AccessPolicies: 2, UserIstioObjects: 2}},
		{name: "destinations", counts: snapshots.InputCounts{Destinations: 4}, limit: "destinations", kind: "destinations"},
		{name: "workloads", counts: snapshots.InputCounts{Workloads: 4}, limit: "workloads", kind: "workloads"},
		{name: "meshes", counts: snapshots.InputCounts{Meshes: 2}, limit: "meshes", kind: "meshes"},
		{name: "virtual meshes", counts: snapshots.InputCounts{VirtualMeshes: 3}, limit: "policies", kind: "VirtualMeshes"},
		{name: "traffic policies", counts: snapshots.InputCounts{TrafficPolicies: 3}, limit: "policies", kind: "TrafficPolicies"},
		{name: "access policies", counts: snapshots.InputCounts{AccessPolicies: 3}, limit: "policies", kind: "AccessPolicies"},
		{name: "virtual destinations", counts: snapshots.InputCounts{VirtualDestinations: 3}, limit: "policies", kind: "VirtualDestinations"},
		{name: "settings", counts: snapshots.InputCounts{Settings: 3}, limit: "policies", kind: "Settings"},
		{name: "wasm deployment policies", counts: snapshots.InputCounts{WasmDeploymentPolicies: 3}, limit: "policies", kind: "WasmDeploymentPolicies"},
		{name: "access log policies", counts: snapshots.InputCounts{AccessLogPolicies: 3}, limit: "policies", kind: "AccessLogPolicies"},
		{name: "user istio objects", counts: snapshots.InputCounts{UserIstioObjects: 3}, limit: "istio-objects", kind: "user Istio objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := l.Check(tc.counts)
			if tc.limit == "" {
				if err != nil {
					t.Fatalf("Check: %v, want none", err)
				}
				return
			}
			var le *app.LimitError
			if !errors.As(err, &le) || !errors.Is(err, app.ErrLimitExceeded) {
				t.Fatalf("Check: %v, want a LimitError", err)
			}
			if le.Limit != tc.limit || le.Kind != tc.kind {
				t.Fatalf("LimitError names limit %q kind %q, want %q %q", le.Limit, le.Kind, tc.limit, tc.kind)
			}
			if !strings.Contains(err.Error(), "--max-input-"+tc.limit) || !strings.Contains(err.Error(), fmt.Sprint(le.Count)) {
				t.Fatalf("message %q names neither the flag nor the count", err)
			}
		})
	}
	if err := (app.Limits{}).Check(snapshots.InputCounts{Destinations: 1 << 30}); err != nil {
		t.Fatalf("zero limits bound nothing, got %v", err)
	}
	if err := (app.Limits{Policies: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "--max-input-policies") {
		t.Fatalf("Validate of a negative limit: %v", err)
	}
	if err := app.DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
}

// The reference estate's cluster (1,000 services with two workloads each,
// and 10,000 TrafficPolicies in all) is within the default limits.
func TestDefaultLimitsHoldTheReferenceEstate(t *testing.T) {
	ref := snapshots.InputCounts{Meshes: 1, Destinations: 1_000, Workloads: 2_000, TrafficPolicies: 10_000, AccessPolicies: 5_000, VirtualMeshes: 1}
	if err := app.DefaultLimits().Check(ref); err != nil {
		t.Fatal(err)
	}
}

// refusalMetrics records PushRefused.
type refusalMetrics struct {
	app.NopMetrics
	mu      sync.Mutex
	refused []string
}

func (m *refusalMetrics) PushRefused(cluster, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused = append(m.refused, cluster+" "+reason)
}

func (m *refusalMetrics) all() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.refused...)
}

// A push over a limit is refused on the fast path (canonical encoding) and
// on the decoding path alike; the last good snapshot stays stored, nothing
// is announced, the refusal is counted and reported until a push is
// accepted again.
func TestPushFromAgentOverLimit(t *testing.T) {
	good := sealed("east", []string{"a", "b"}, nil)
	big := sealed("east", []string{"a", "b", "c", "d"}, func(s *snapshotv1.InputSnapshot) {
		s.Destinations[0].Metadata.Labels = map[string]string{"app": "a", "b": "1", "c": "2", "d": "3"}
	})
	manyPolicies := sealed("east", []string{"a"}, func(s *snapshotv1.InputSnapshot) {
		for i := range 3 {
			s.TrafficPolicies = append(s.TrafficPolicies, &networkingv1.TrafficPolicy{Metadata: &commonv1.ObjectMeta{Name: fmt.Sprint("tp", i), Namespace: "default", Cluster: "east"}})
		}
	})
	encode := func(s *snapshotv1.InputSnapshot) []byte {
		e, err := snapshots.EncodeInput(s)
		if err != nil {
			t.Fatal(err)
		}
		return e.Data
	}
	bigData := encode(big)
	for _, tc := range []struct {
		name        string
		data        []byte
		limit, kind string
	}{
		{name: "canonical encoding", data: bigData, limit: "destinations", kind: "destinations"},
		// The cluster field repeated: valid, but not canonical, so it would
		// be decoded.
		{name: "other encoding", data: protowire.AppendString(protowire.AppendTag(bytes.Clone(bigData), 1, protowire.BytesType), "east"), limit: "destinations", kind: "destinations"},
		{name: "claiming another cluster", data: encode(sealed("west", []string{"a", "b", "c", "d"}, nil)), limit: "destinations", kind: "destinations"},
		{name: "policies", data: encode(manyPolicies), limit: "policies", kind: "TrafficPolicies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
			store := newCountingStore()
			notifier := &recordingNotifier{}
			metrics := &refusalMetrics{}
			in := app.NewIngestor(store, notifier, metrics, slog.New(slog.DiscardHandler), "r",
				app.WithLimits(app.Limits{Destinations: 3, Policies: 2}), app.WithClock(func() time.Time { return now }))
			if _, err := in.PushFromAgent(ctx, "east", encode(good)); err != nil {
				t.Fatal(err)
			}
			_, err := in.PushFromAgent(ctx, "east", tc.data)
			var le *app.LimitError
			if !errors.As(err, &le) || le.Limit != tc.limit || le.Kind != tc.kind {
				t.Fatalf("PushFromAgent: %v, want the %s limit (%s)", err, tc.limit, tc.kind)
			}
			if store.putCount() != 1 || len(notifier.all()) != 1 {
				t.Fatalf("a refused snapshot was stored (%d puts) or announced (%d notices)", store.putCount(), len(notifier.all()))
			}
			if got, err := in.Snapshot(ctx, "east"); err != nil || !proto.Equal(got, good) {
				t.Fatalf("the last good snapshot is no longer in use: %v, %v", got.GetVersion(), err)
			}
			if got := metrics.all(); len(got) != 1 || got[0] != "east "+tc.limit {
				t.Fatalf("refusals counted %q, want [east %s]", got, tc.limit)
			}
			st := in.Clusters()
			if len(st) != 1 || st[0].Refused == nil || st[0].Refused.Reason != tc.limit || st[0].Refused.Message != err.Error() || !st[0].Refused.At.Equal(now) {
				t.Fatalf("Clusters() = %+v, want the refusal reported", st)
			}
			if st[0].Version != good.GetVersion() {
				t.Fatalf("reported version %s, want the last good %s", st[0].Version, good.GetVersion())
			}
			// An accepted push clears the refusal.
			if _, err := in.PushFromAgent(ctx, "east", encode(good)); err != nil {
				t.Fatal(err)
			}
			if st := in.Clusters(); st[0].Refused != nil {
				t.Fatalf("refusal still reported after an accepted push: %+v", st[0].Refused)
			}
		})
	}
}

// Invalid and reserved-cluster pushes are reported as refusals too, with
// their own reason.
func TestPushFromAgentRefusalReasons(t *testing.T) {
	metrics := &refusalMetrics{}
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, metrics, slog.New(slog.DiscardHandler), "r")
	in.Reserve("mgmt")
	if _, err := in.PushFromAgent(t.Context(), "east", []byte("garbage")); !errors.Is(err, app.ErrInvalidSnapshot) {
		t.Fatal(err)
	}
	e, err := snapshots.EncodeInput(sealed("mgmt", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.PushFromAgent(t.Context(), "mgmt", e.Data); !errors.Is(err, app.ErrReservedCluster) {
		t.Fatal(err)
	}
	if got := metrics.all(); len(got) != 2 || got[0] != "east invalid" || got[1] != "mgmt reserved-cluster" {
		t.Fatalf("refusals counted %q", got)
	}
}

// The limits do not bound the management cluster's own input, which
// ingest reads itself (Push).
func TestPushIsNotLimited(t *testing.T) {
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "r", app.WithLimits(app.Limits{Destinations: 1}))
	s := sealed("mgmt", []string{"a", "b"}, nil)
	if _, err := in.Push(t.Context(), "mgmt", s); err != nil {
		t.Fatal(err)
	}
}
