package connectrpc

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// Cookie and header names of the browser contract.
const (
	SessionCookie = "mp_session"
	CSRFCookie    = "mp_csrf"
	CSRFHeader    = "X-CSRF-Token"
)

type sessionKey struct{}

// SessionChecker checks a session ID and CSRF token.
type SessionChecker interface {
	Check(id, csrf string) (domain.Session, error)
}

// SessionFromContext is the session the interceptor admitted.
func SessionFromContext(ctx context.Context) (domain.Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(domain.Session)
	return s, ok
}

// sessionInterceptor admits a call only with a valid session cookie and
// the session's CSRF token in the X-CSRF-Token header: a cross-site page
// can make the browser send the cookie, but cannot read the CSRF cookie to
// set the header.
type sessionInterceptor struct{ sessions SessionChecker }

func (i sessionInterceptor) admit(ctx context.Context, h http.Header) (context.Context, error) {
	r := http.Request{Header: h}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, app.ErrUnauthenticated)
	}
	sess, err := i.sessions.Check(c.Value, h.Get(CSRFHeader))
	if err != nil {
		return nil, toConnect(err)
	}
	return context.WithValue(ctx, sessionKey{}, sess), nil
}

func (i sessionInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.admit(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i sessionInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i sessionInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.admit(ctx, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
