package kube

import (
	"context"
	"fmt"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/meshcrs"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"k8s.io/apimachinery/pkg/api/meta"
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
	got, err := meshcrs.WriteStatusTo(ctx, w.dyn.Resource(gvr).Namespace(st.GetNamespace()), st)
	if err != nil {
		return 0, err
	}
	switch got {
	case meshcrs.StatusWritten:
		return app.StatusWritten, nil
	case meshcrs.StatusCurrent:
		return app.StatusCurrent, nil
	default:
		return app.StatusSkipped, nil
	}
}

func groupOf(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}
