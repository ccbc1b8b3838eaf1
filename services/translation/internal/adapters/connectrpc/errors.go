package connectrpc

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/app"
)

// toConnect maps app errors to Connect codes: the one table for this
// adapter.
func toConnect(err error) error {
	switch {
	case errors.Is(err, app.ErrInvalidInput):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, snapshots.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	default:
		return connect.NewError(connect.CodeUnavailable, err)
	}
}

func errNoOutput(cluster string) error {
	return fmt.Errorf("no output snapshot for cluster %q", cluster)
}
