// Package lastgoodtest is the contract every app.LastGoodStore keeps: the
// memory and Kubernetes adapters run the same suite.
package lastgoodtest

import (
	"strings"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FirstSeen is the first-seen time of Versions' workload-cluster records,
// with nanoseconds, which a store must keep.
var FirstSeen = time.Date(2026, 11, 25, 10, 30, 0, 123456789, time.UTC)

// Versions are four records of different kinds: one with a key longer than
// an object name may be, and one of a resource that was never valid (no
// spec, only its first-seen time).
func Versions() []domain.KeptVersion {
	long := strings.Repeat("n", 200)
	return []domain.KeptVersion{
		{Kind: domain.KindTrafficPolicy, Key: domain.ObjectKey{Cluster: "east", Namespace: "bookinfo", Name: "reviews"}, Generation: 3, UID: "u-1", FirstSeen: FirstSeen,
			Spec: &networkingv1.TrafficPolicySpec{
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews", Namespace: "bookinfo"}}},
				}}},
				Policy: &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 3, PerTryTimeout: durationpb.New(2e9)}},
			}},
		{Kind: domain.KindVirtualMesh, Key: domain.ObjectKey{Cluster: "mgmt", Namespace: "meshplane", Name: long}, Generation: 1, UID: "u-2",
			Spec: &networkingv1.VirtualMeshSpec{Meshes: []*commonv1.ObjectRef{{Name: "istiod", Namespace: "istio-system"}}, GlobalAccessPolicy: networkingv1.VirtualMeshSpec_ENABLED}},
		{Kind: domain.KindSettings, Key: domain.ObjectKey{Cluster: "mgmt", Namespace: "meshplane", Name: "settings"}, Generation: 7,
			Spec: &settingsv1.SettingsSpec{UserConfigConflictMode: settingsv1.SettingsSpec_ALLOW_INTERSECTING}},
		{Kind: domain.KindAccessPolicy, Key: domain.ObjectKey{Cluster: "west", Namespace: "bookinfo", Name: "never-valid"}, UID: "u-4", FirstSeen: FirstSeen.Add(time.Second)},
	}
}

// Run runs the contract against a fresh, empty store that newStore makes.
func Run(t *testing.T, newStore func(t *testing.T) app.LastGoodStore) {
	t.Run("empty", func(t *testing.T) {
		got, err := newStore(t).Load(t.Context())
		if err != nil || len(got) != 0 {
			t.Fatalf("Load = %v, %v; want nothing", got, err)
		}
	})
	t.Run("put, replace, delete", func(t *testing.T) {
		s := newStore(t)
		ctx := t.Context()
		want := Versions()
		for _, v := range want {
			if err := s.Put(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		Expect(t, s, want)

		// A new generation replaces the old one.
		next := want[0]
		next.Generation, next.Spec = 4, &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: durationpb.New(1e9)}}
		if err := s.Put(ctx, next); err != nil {
			t.Fatal(err)
		}
		want[0] = next
		Expect(t, s, want)

		if err := s.Delete(ctx, want[1].Kind, want[1].Key); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, want[1].Kind, want[1].Key); err != nil {
			t.Fatalf("deleting a version twice: %v", err)
		}
		// The same key under another kind is another resource.
		if err := s.Delete(ctx, domain.KindAccessPolicy, want[0].Key); err != nil {
			t.Fatal(err)
		}
		Expect(t, s, []domain.KeptVersion{want[0], want[2], want[3]})
	})
}

// Expect checks that s holds exactly want, in any order.
func Expect(t *testing.T, s app.LastGoodStore, want []domain.KeptVersion) {
	t.Helper()
	got, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Load returned %d versions, want %d: %v", len(got), len(want), got)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g.Kind == w.Kind && g.Key == w.Key {
				found = true
				if g.Generation != w.Generation || g.UID != w.UID || (g.Spec == nil) != (w.Spec == nil) || !proto.Equal(g.Spec, w.Spec) {
					t.Errorf("%s %s: got generation %d uid %q spec %v, want %d %q %v", w.Kind, w.Key, g.Generation, g.UID, g.Spec, w.Generation, w.UID, w.Spec)
				}
				// A store may give a record written without a first-seen
				// time one of its own (when it wrote the record).
				if !w.FirstSeen.IsZero() && !g.FirstSeen.Equal(w.FirstSeen) {
					t.Errorf("%s %s: first seen %v, want %v", w.Kind, w.Key, g.FirstSeen, w.FirstSeen)
				}
			}
		}
		if !found {
			t.Errorf("%s %s is missing", w.Kind, w.Key)
		}
	}
}
