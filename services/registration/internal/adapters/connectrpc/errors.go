package connectrpc

import (
	"errors"
	"net"

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
	case errors.Is(err, app.ErrNotDurable):
		// Redis took the write but too few replicas acknowledged it
		// (--redis-wait-replicas): retrying is safe.
		return connect.NewError(connect.CodeUnavailable, errors.New("registration's store did not replicate the write in time (too few Redis replicas); retry, and see the server's log"))
	case isNetError(err):
		// The store (Redis) cannot be reached: the caller may retry, and
		// an operator should look at Redis rather than at this service.
		// Addresses stay in the server's log.
		return connect.NewError(connect.CodeUnavailable, errors.New("registration's store (Redis) is unreachable; see the server's log"))
	default:
		return connect.NewError(connect.CodeInternal, errors.New("registration failed; see the server's log"))
	}
	return connect.NewError(code, err)
}

// isNetError reports a network failure under err: a store that cannot be
// dialled or stopped answering.
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}
