package connectrpc

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

// toConnect maps app errors to Connect codes: the one table for this
// adapter.
func toConnect(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, app.ErrInvalidSnapshot), errors.Is(err, app.ErrInvalidAccessLogs):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, app.ErrLimitExceeded):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, app.ErrReservedCluster):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, snapshots.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	default:
		return connect.NewError(connect.CodeUnavailable, err)
	}
}
