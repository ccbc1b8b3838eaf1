package connectrpc

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

// watchBatch is the most entries sent in one WatchAccessLogs message.
const watchBatch = 500

// AccessLogHandler implements IngestService.PushAccessLogs and
// WatchAccessLogs.
type AccessLogHandler struct {
	logs *app.AccessLogs
	log  *slog.Logger
}

// NewAccessLogHandler returns the access-log handler.
func NewAccessLogHandler(logs *app.AccessLogs, log *slog.Logger) *AccessLogHandler {
	return &AccessLogHandler{logs: logs, log: log}
}

// WithAccessLogs serves IngestService with h for everything but the
// access-log procedures, which logs serves.
func WithAccessLogs(h *Handler, logs *AccessLogHandler) ingestv1connect.IngestServiceHandler {
	return struct {
		*Handler
		*AccessLogHandler
	}{h, logs}
}

// PushAccessLogs takes batches from an agent replica of the caller's
// cluster, named by its certificate. A batch naming another cluster ends
// the stream with InvalidArgument.
func (h *AccessLogHandler) PushAccessLogs(ctx context.Context, stream *connect.ClientStream[ingestv1.PushAccessLogsRequest]) (*connect.Response[ingestv1.PushAccessLogsResponse], error) {
	cluster, err := platform.ClusterFromContext(ctx)
	if err != nil {
		return nil, err
	}
	var accepted uint64
	for {
		// Not a bare Receive: the drain on shutdown and a revocation end
		// ctx, and must end the stream.
		more, err := platform.ReceiveOrDone(ctx, func() (bool, error) { return stream.Receive(), nil })
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		req := stream.Msg()
		n, err := h.logs.Push(ctx, cluster, req.GetEntries(), req.GetDropped())
		accepted += uint64(n)
		if err != nil {
			h.log.Warn("refused access-log batch", "cluster", cluster, "error", err)
			return nil, toConnect(err)
		}
	}
	if err := stream.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return connect.NewResponse(&ingestv1.PushAccessLogsResponse{Accepted: accepted}), nil
}

// WatchAccessLogs sends the tail, then, with follow, new entries until the
// caller goes away.
func (h *AccessLogHandler) WatchAccessLogs(ctx context.Context, req *connect.Request[ingestv1.WatchAccessLogsRequest], stream *connect.ServerStream[ingestv1.WatchAccessLogsResponse]) error {
	m := req.Msg
	f := app.AccessLogFilter{
		Cluster: m.GetCluster(), Namespace: m.GetNamespace(), WorkloadPrefix: m.GetWorkload(),
		Policy: m.GetPolicy(), MinResponseCode: m.GetMinResponseCode(),
	}
	if err := f.Validate(); err != nil {
		return toConnect(err)
	}
	if !m.GetFollow() {
		return sendBatches(stream, h.logs.Tail(f, int(m.GetTail())))
	}
	first, w := h.logs.Watch(f, int(m.GetTail()))
	defer w.Close()
	if len(first) == 0 {
		// An empty message sends the response headers, so that the
		// caller knows the watch is open before any entry arrives.
		if err := stream.Send(&ingestv1.WatchAccessLogsResponse{}); err != nil {
			return err
		}
	}
	if err := sendBatches(stream, first); err != nil {
		return err
	}
	for {
		entries, _, err := w.Next(ctx)
		if err != nil {
			return nil // the caller went away
		}
		if err := sendBatches(stream, entries); err != nil {
			return err
		}
	}
}

func sendBatches(stream *connect.ServerStream[ingestv1.WatchAccessLogsResponse], entries []*observabilityv1.AccessLogEntry) error {
	for len(entries) > 0 {
		n := min(len(entries), watchBatch)
		if err := stream.Send(&ingestv1.WatchAccessLogsResponse{Entries: entries[:n]}); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}
