package connectrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// NewServiceHandler returns the IngestService handler: the generated one,
// except that Push reads its requests as EncodedPushRequest (the same wire
// format as PushRequest), so that the snapshot reaches the ingestor as the
// bytes the agent sent. opts are the server's handler options.
func NewServiceHandler(svc ingestv1connect.IngestServiceHandler, h *Handler, opts ...connect.HandlerOption) (string, http.Handler) {
	path, generated := ingestv1connect.NewIngestServiceHandler(svc, opts...)
	method := ingestv1.File_meshplane_ingest_v1_ingest_proto.Services().ByName("IngestService").Methods().ByName("Push")
	push := connect.NewBidiStreamHandler(ingestv1connect.IngestServicePushProcedure, h.PushEncoded,
		append(append([]connect.HandlerOption{}, opts...),
			connect.WithSchema(method),
			// A JSON client sends the snapshot as an object: decode it as
			// PushRequest and hand on its encoding.
			connect.WithCodec(encodedPushJSON{name: "json"}),
			connect.WithCodec(encodedPushJSON{name: "json; charset=utf-8"}),
		)...)
	return path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ingestv1connect.IngestServicePushProcedure {
			push.ServeHTTP(w, r)
			return
		}
		generated.ServeHTTP(w, r)
	})
}

// PushEncoded takes snapshots from the caller's own cluster, named by its
// certificate. An invalid snapshot ends the stream with InvalidArgument;
// the last good snapshot stays.
func (h *Handler) PushEncoded(ctx context.Context, stream *connect.BidiStream[ingestv1.EncodedPushRequest, ingestv1.PushResponse]) error {
	cluster, err := platform.ClusterFromContext(ctx)
	if err != nil {
		return err
	}
	disconnect := h.in.Connect(cluster)
	defer disconnect()
	for {
		// Not a bare Receive: the drain on shutdown and a revocation end
		// ctx, and must end the stream.
		req, err := platform.ReceiveOrDone(ctx, stream.Receive)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		version, err := h.in.PushFromAgent(ctx, cluster, req.GetSnapshot())
		if err != nil {
			h.log.Warn("refused input snapshot", "cluster", cluster, "error", err)
			return toConnect(err)
		}
		if err := stream.Send(&ingestv1.PushResponse{StoredVersion: version}); err != nil {
			return err
		}
	}
}

// encodedPushJSON is Connect's JSON codec for a Push handler whose requests
// are EncodedPushRequest: a request is read as the PushRequest it is, and
// its snapshot encoded.
type encodedPushJSON struct{ name string }

func (c encodedPushJSON) Name() string { return c.name }

func (c encodedPushJSON) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", msg)
	}
	return protojson.Marshal(m)
}

func (c encodedPushJSON) Unmarshal(data []byte, msg any) error {
	opts := protojson.UnmarshalOptions{DiscardUnknown: true}
	enc, ok := msg.(*ingestv1.EncodedPushRequest)
	if !ok {
		m, ok := msg.(proto.Message)
		if !ok {
			return fmt.Errorf("%T is not a protobuf message", msg)
		}
		return opts.Unmarshal(data, m)
	}
	var req ingestv1.PushRequest
	if err := opts.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("unmarshal PushRequest: %w", err)
	}
	if req.GetSnapshot() == nil {
		enc.Snapshot = nil
		return nil
	}
	b, err := proto.Marshal(req.GetSnapshot())
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	enc.Snapshot = b
	return nil
}
