package meshcrs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// FieldManager names Meshplane's writes to the API server.
const FieldManager = "meshplane"

// StatusOutcome says what WriteStatus did.
type StatusOutcome int

const (
	// StatusWritten: the status was replaced.
	StatusWritten StatusOutcome = iota + 1
	// StatusCurrent: the resource already had the status.
	StatusCurrent
	// StatusSkipped: the resource is gone, or its generation is not the
	// one the status was computed for; a newer status will follow.
	StatusSkipped
)

// KindOf returns the Meshplane kind of apiVersion and kind.
func KindOf(apiVersion, kind string) (Kind, bool) {
	for _, k := range kinds {
		if k.APIVersion() == apiVersion && k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// WriteStatus writes st to the Meshplane resource it is for, which it
// finds by st's apiVersion and kind.
func WriteStatus(ctx context.Context, dyn dynamic.Interface, st *snapshotv1.ResourceStatus) (StatusOutcome, error) {
	k, ok := KindOf(st.GetApiVersion(), st.GetKind())
	if !ok {
		// Statuses are only ever Meshplane's to write.
		return 0, fmt.Errorf("%s %s is not a Meshplane resource", st.GetApiVersion(), st.GetKind())
	}
	return WriteStatusTo(ctx, dyn.Resource(k.GVR).Namespace(st.GetNamespace()), st)
}

// WriteStatusTo reads the resource that st is for through client and
// replaces its status with st.Status when its generation is
// st.ObservedGeneration and the status differs. The update carries the
// resourceVersion that was read, so a resource changed in between fails
// with a conflict instead of getting a stale status: the caller retries.
func WriteStatusTo(ctx context.Context, client dynamic.ResourceInterface, st *snapshotv1.ResourceStatus) (StatusOutcome, error) {
	var want any
	if err := json.Unmarshal(st.GetStatus(), &want); err != nil {
		return 0, fmt.Errorf("decode status of %s %s/%s: %w", st.GetKind(), st.GetNamespace(), st.GetName(), err)
	}
	cur, err := client.Get(ctx, st.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return StatusSkipped, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s %s/%s: %w", st.GetKind(), st.GetNamespace(), st.GetName(), err)
	}
	if cur.GetGeneration() != st.GetObservedGeneration() {
		return StatusSkipped, nil
	}
	same, err := sameJSON(cur.Object["status"], want)
	if err != nil {
		return 0, err
	}
	if same {
		return StatusCurrent, nil
	}
	cur.Object["status"] = want
	if _, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return 0, fmt.Errorf("update status of %s %s/%s: %w", st.GetKind(), st.GetNamespace(), st.GetName(), err)
	}
	return StatusWritten, nil
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
