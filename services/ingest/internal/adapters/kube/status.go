package kube

import (
	"context"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/meshcrs"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"k8s.io/client-go/dynamic"
)

// StatusWriter writes statuses to the status subresource of the
// management cluster's Meshplane resources.
type StatusWriter struct {
	dyn dynamic.Interface
}

var _ app.StatusWriter = (*StatusWriter)(nil)

// NewStatusWriter returns a status writer over dyn.
func NewStatusWriter(dyn dynamic.Interface) *StatusWriter { return &StatusWriter{dyn: dyn} }

// WriteStatus writes st unless the resource is gone or has moved to a
// generation that st was not computed for.
func (w *StatusWriter) WriteStatus(ctx context.Context, st *snapshotv1.ResourceStatus) error {
	_, err := meshcrs.WriteStatus(ctx, w.dyn, st)
	return err
}
