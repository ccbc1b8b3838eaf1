package app

import (
	"errors"
	"fmt"
)

// Errors the use cases return; the inbound adapters map them in one table.
var (
	// ErrUnauthenticated: no session, an expired one, or a wrong CSRF
	// token.
	ErrUnauthenticated = errors.New("not signed in, or the session expired")
	// ErrTokenRefused: TokenReview did not authenticate the token. The
	// message says no more, on purpose.
	ErrTokenRefused = errors.New("the token was not accepted by the management cluster")
	// ErrTooManyFailures: the client failed to sign in too often.
	ErrTooManyFailures = errors.New("too many failed sign-ins; try again later")
	// ErrInvalid: a request names something that cannot be.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: the thing asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: a management service or the management cluster
	// could not be asked.
	ErrUnavailable = errors.New("unavailable")
)

// DeniedError is a view the user's RBAC does not allow; its message names
// the verb and resource.
type DeniedError struct {
	User string
	What string
}

func (e *DeniedError) Error() string { return fmt.Sprintf("user %q may not %s", e.User, e.What) }
