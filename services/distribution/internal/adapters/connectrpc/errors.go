package connectrpc

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
)

// toConnect maps app errors to Connect codes: the one table for this
// adapter.
func toConnect(err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, app.ErrInvalidAck):
		return connect.NewError(connect.CodeInvalidArgument, err)
	default:
		return connect.NewError(connect.CodeUnavailable, err)
	}
}
