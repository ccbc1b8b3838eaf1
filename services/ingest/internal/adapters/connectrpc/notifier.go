package connectrpc

import (
	"context"

	"connectrpc.com/connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

// Notifier calls TranslationService.Notify.
type Notifier struct {
	client translationv1connect.TranslationServiceClient
}

var _ app.TranslationNotifier = (*Notifier)(nil)

// NewNotifier returns a notifier over a translation client.
func NewNotifier(client translationv1connect.TranslationServiceClient) *Notifier {
	return &Notifier{client: client}
}

func (n *Notifier) Notify(ctx context.Context, cluster, version string, s *snapshotv1.InputSnapshot) error {
	_, err := n.client.Notify(ctx, connect.NewRequest(&translationv1.NotifyRequest{Cluster: cluster, Version: version, Snapshot: s}))
	return err
}
