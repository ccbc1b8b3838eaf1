package connectrpc

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// toConnect maps app errors to Connect codes: the one table for this
// adapter.
func toConnect(err error) error {
	switch {
	case errors.Is(err, app.ErrUnknownToken):
		return connect.NewError(connect.CodeUnauthenticated, err)
	case errors.Is(err, domain.ErrInvalidCSR):
		return connect.NewError(connect.CodeInvalidArgument, err)
	default:
		return connect.NewError(connect.CodeInternal, errors.New("signing failed"))
	}
}
