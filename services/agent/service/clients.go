package service

import (
	"net/http"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/platform"
)

type connectClient struct {
	c    *http.Client
	url  string
	opts platform.ClientOptions
}

func (c connectClient) options() []connect.ClientOption {
	// gRPC framing for long-lived streams through proxies that speak it.
	return append(platform.DefaultClientOptions(c.opts), connect.WithGRPC())
}
