package platform_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/meshplane/meshplane/libs/platform"
)

// A plaintext server on a loopback listener, checked over gRPC. Real
// deployments leave Plaintext off and set the TLS files.
func ExampleServer() {
	opts := platform.NewServerOptions()
	opts.TLS = platform.TLSOptions{Plaintext: true}
	logger := slog.New(slog.DiscardHandler)
	srv, err := platform.NewServer(opts, logger, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv.SetReady(true)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	co := platform.NewClientOptions()
	co.Addr, co.Plaintext = ln.Addr().String(), true
	hc, err := platform.NewHTTPClient(co, logger)
	if err != nil {
		fmt.Println(err)
		return
	}
	health := grpchealth.NewClient(hc, platform.BaseURL(co),
		append(platform.DefaultClientOptions(co), connect.WithGRPC())...)
	res, err := health.Check(ctx, &grpchealth.CheckRequest{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status)

	hc.CloseIdleConnections()
	stop()
	fmt.Println("stopped:", <-served)
	// Output:
	// serving
	// stopped: <nil>
}
