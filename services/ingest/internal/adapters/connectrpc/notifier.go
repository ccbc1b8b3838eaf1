package connectrpc

import (
	"context"

	"connectrpc.com/connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

// Notifier calls TranslationService.Notify with EncodedNotifyRequest (the
// same wire format as NotifyRequest), so that the snapshot is sent as the
// bytes ingest stored, without encoding it again.
type Notifier struct {
	client *connect.Client[translationv1.EncodedNotifyRequest, translationv1.NotifyResponse]
}

var _ app.TranslationNotifier = (*Notifier)(nil)

// NewNotifier returns a notifier that calls the translation service at
// baseURL through httpClient, with the client options opts.
func NewNotifier(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Notifier {
	method := translationv1.File_meshplane_translation_v1_translation_proto.Services().ByName("TranslationService").Methods().ByName("Notify")
	opts = append(append([]connect.ClientOption{}, opts...), connect.WithSchema(method))
	return &Notifier{client: connect.NewClient[translationv1.EncodedNotifyRequest, translationv1.NotifyResponse](
		httpClient, baseURL+translationv1connect.TranslationServiceNotifyProcedure, opts...)}
}

func (n *Notifier) Notify(ctx context.Context, cluster, version string, snapshot []byte) error {
	_, err := n.client.CallUnary(ctx, connect.NewRequest(&translationv1.EncodedNotifyRequest{Cluster: cluster, Version: version, Snapshot: snapshot}))
	return err
}
