package connectrpc

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// AccessLogSender streams access-log batches to IngestService.PushAccessLogs.
type AccessLogSender struct {
	client ingestv1connect.IngestServiceClient
}

var _ app.AccessLogSender = (*AccessLogSender)(nil)

// NewAccessLogSender returns a sender over an mTLS ingest client: ingest
// takes the cluster from the client certificate.
func NewAccessLogSender(client ingestv1connect.IngestServiceClient) *AccessLogSender {
	return &AccessLogSender{client: client}
}

// OpenAccessLogs implements app.AccessLogSender.
func (s *AccessLogSender) OpenAccessLogs(ctx context.Context) (app.AccessLogStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	return &accessLogStream{s: s.client.PushAccessLogs(ctx), cancel: cancel}, nil
}

type accessLogStream struct {
	s      *connect.ClientStreamForClient[ingestv1.PushAccessLogsRequest, ingestv1.PushAccessLogsResponse]
	cancel context.CancelFunc
}

func (a *accessLogStream) Send(entries []*observabilityv1.AccessLogEntry, dropped uint64) error {
	err := a.s.Send(&ingestv1.PushAccessLogsRequest{Entries: entries, Dropped: dropped})
	if errors.Is(err, io.EOF) {
		// The server ended the stream; its reason comes with the answer.
		if _, rerr := a.s.CloseAndReceive(); rerr != nil {
			return rerr
		}
	}
	return err
}

// Close ends the stream. A stream that broke is only cancelled: there is
// no answer to wait for.
func (a *accessLogStream) Close() error {
	defer a.cancel()
	_, err := a.s.CloseAndReceive()
	return err
}
