package connectrpc

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// toConnect maps app and domain errors to Connect codes: the one table for
// this adapter. Errors the caller can act on keep their message; anything
// else is logged by the interceptors and answered as Internal without
// details.
func toConnect(err error) error {
	var code connect.Code
	switch {
	case errors.Is(err, domain.ErrTokenInvalid), errors.Is(err, domain.ErrTokenExpired), errors.Is(err, domain.ErrTokenUsed):
		code = connect.CodeUnauthenticated
	case errors.Is(err, domain.ErrInvalidCSR), errors.Is(err, app.ErrInvalidArgument):
		code = connect.CodeInvalidArgument
	case errors.Is(err, domain.ErrPendingApproval), errors.Is(err, domain.ErrIntermediatePrecondition):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, domain.ErrDeregistered), errors.Is(err, domain.ErrIntermediateDenied):
		code = connect.CodePermissionDenied
	case errors.Is(err, domain.ErrClusterNotFound):
		code = connect.CodeNotFound
	default:
		return connect.NewError(connect.CodeInternal, errors.New("registration failed; see the server's log"))
	}
	return connect.NewError(code, err)
}
