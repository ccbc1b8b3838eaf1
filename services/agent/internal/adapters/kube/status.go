package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// StatusWriter writes statuses to the status subresource of the user's
// Meshplane resources.
type StatusWriter struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

var _ app.StatusWriter = (*StatusWriter)(nil)

// NewStatusWriter returns a status writer.
func NewStatusWriter(dyn dynamic.Interface, mapper meta.RESTMapper) *StatusWriter {
	return &StatusWriter{dyn: dyn, mapper: mapper}
}

// WriteStatus reads the resource, and replaces its status with st.Status
// when its generation is st.ObservedGeneration and the status differs. The
// update carries the resourceVersion that was read, so a resource changed
// in between (a new generation) fails with a conflict instead of getting a
// stale status; the next round reads it again.
func (w *StatusWriter) WriteStatus(ctx context.Context, st *snapshotv1.ResourceStatus) (app.StatusOutcome, error) {
	if !strings.HasSuffix(groupOf(st.GetApiVersion()), ".meshplane.dev") {
		// Statuses are only ever Meshplane's to write.
		return 0, fmt.Errorf("%s %s is not a Meshplane resource", st.GetApiVersion(), st.GetKind())
	}
	gvr, err := mapResource(w.mapper, st.GetApiVersion(), st.GetKind())
	if err != nil {
		return 0, err
	}
	var want any
	if err := json.Unmarshal(st.GetStatus(), &want); err != nil {
		return 0, fmt.Errorf("decode status: %w", err)
	}
	client := w.dyn.Resource(gvr).Namespace(st.GetNamespace())
	cur, err := client.Get(ctx, st.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return app.StatusSkipped, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s %s/%s: %w", st.GetKind(), st.GetNamespace(), st.GetName(), err)
	}
	if cur.GetGeneration() != st.GetObservedGeneration() {
		return app.StatusSkipped, nil
	}
	same, err := sameJSON(cur.Object["status"], want)
	if err != nil {
		return 0, err
	}
	if same {
		return app.StatusCurrent, nil
	}
	cur.Object["status"] = want
	if _, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: snapshots.FieldManager}); err != nil {
		return 0, fmt.Errorf("update status of %s %s/%s: %w", st.GetKind(), st.GetNamespace(), st.GetName(), err)
	}
	return app.StatusWritten, nil
}

func groupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// sameJSON compares two JSON values as JSON: the API server decodes
// integers as int64 and encoding/json as float64.
func sameJSON(a, b any) (bool, error) {
	norm := func(v any) (any, error) {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var out any
		return out, json.Unmarshal(raw, &out)
	}
	na, err := norm(a)
	if err != nil {
		return false, err
	}
	nb, err := norm(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(na, nb), nil
}
