package connectrpc

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/services/console/internal/app"
)

// toConnect maps the use cases' errors to Connect codes: the one table of
// this adapter.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var denied *app.DeniedError
	switch {
	case errors.As(err, &denied):
		return connect.NewError(connect.CodePermissionDenied, denied)
	case errors.Is(err, app.ErrUnauthenticated):
		return connect.NewError(connect.CodeUnauthenticated, app.ErrUnauthenticated)
	case errors.Is(err, app.ErrInvalid):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, app.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, app.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}
