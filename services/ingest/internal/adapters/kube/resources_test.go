package kube_test

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/ingest/internal/adapters/kube"
)

func names(s *snapshotv1.InputSnapshot) []string {
	var out []string
	for _, tp := range s.GetTrafficPolicies() {
		out = append(out, tp.GetMetadata().GetName())
	}
	for _, ap := range s.GetAccessPolicies() {
		out = append(out, ap.GetMetadata().GetName())
	}
	for _, wp := range s.GetWasmDeploymentPolicies() {
		out = append(out, wp.GetMetadata().GetName())
	}
	for _, lp := range s.GetAccessLogPolicies() {
		out = append(out, lp.GetMetadata().GetName())
	}
	slices.Sort(out)
	return out
}

// TestResourcesReadsWhatItMay: with RBAC that lets it list TrafficPolicies
// only, the watcher still syncs and reports them; the resources it may not
// read wait as a missing CRD would, instead of holding back the rest.
func TestResourcesReadsWhatItMay(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	ctx := t.Context()
	if err := c.ApplyYAML(ctx, []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: retries, namespace: bookinfo}
spec: {}
---
apiVersion: networking.meshplane.dev/v1
kind: AccessPolicy
metadata: {name: allow, namespace: bookinfo}
spec: {}
---
apiVersion: networking.meshplane.dev/v1
kind: WasmDeploymentPolicy
metadata: {name: jwt, namespace: bookinfo}
spec:
  filters:
  - name: jwt
    ociImage: ghcr.io/example/jwt:1.0
---
apiVersion: observability.meshplane.dev/v1
kind: AccessLogPolicy
metadata: {name: errors, namespace: bookinfo}
spec:
  filters:
  - statusCodeMatcher: {value: 500, comparator: GE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ingest-tp-only}
rules:
- apiGroups: [networking.meshplane.dev]
  resources: [trafficpolicies]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ingest-tp-only}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ingest-tp-only}
subjects:
- {kind: User, name: ingest, apiGroup: rbac.authorization.k8s.io}
`)); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	check := func(t *testing.T, r *kube.Resources, want []string) {
		t.Helper()
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		var changes atomic.Int32
		go func() { done <- r.Watch(wctx, func() { changes.Add(1) }) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Watch = %v", err)
			}
		}()
		var got []string
		kubetest.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
			if changes.Load() == 0 {
				return false, nil
			}
			s, err := r.Snapshot("mgmt")
			if err != nil {
				return false, err
			}
			got = names(s)
			return slices.Equal(got, want), nil
		}, "the watcher to report %v (last %v)", want, got)
	}

	t.Run("admin", func(t *testing.T) {
		r, err := kube.NewResources(c.RESTConfig(), log)
		if err != nil {
			t.Fatal(err)
		}
		check(t, r, []string{"allow", "errors", "jwt", "retries"})
	})
	t.Run("TrafficPolicies only", func(t *testing.T) {
		cfg, err := c.ConfigFor("ingest")
		if err != nil {
			t.Fatal(err)
		}
		r, err := kube.NewResources(cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		check(t, r, []string{"retries"})
	})
}
