package kube

import (
	"context"
	"fmt"
	"net/http"
)

// WrapTransport returns a rest.Config.WrapTransport for the agent's
// Kubernetes clients. Every request carries userAgent() as its
// User-Agent, so that the API server's audit log names the replica and
// Raft term behind each write. Every write (any method but GET, HEAD and
// OPTIONS) first waits for fence, at the last moment before it is sent: a
// replica that lost leadership while frozen wakes with its writes held
// (app.WriteFence). A nil fence holds nothing.
func WrapTransport(userAgent func() string, fence func(context.Context) error) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &fencedTransport{rt: rt, userAgent: userAgent, fence: fence}
	}
}

type fencedTransport struct {
	rt        http.RoundTripper
	userAgent func() string
	fence     func(context.Context) error
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if t.fence != nil {
			if err := t.fence(req.Context()); err != nil {
				if req.Body != nil {
					req.Body.Close()
				}
				return nil, fmt.Errorf("%s %s held back: %w", req.Method, req.URL.Path, err)
			}
		}
	}
	if t.userAgent != nil {
		// A RoundTripper must not change the request it was given.
		req = req.Clone(req.Context())
		req.Header.Set("User-Agent", t.userAgent())
	}
	return t.rt.RoundTrip(req)
}
