// Package platform is the one way a Meshplane service runs: options with
// flags and environment fallback, a server that speaks Connect, gRPC and
// gRPC-Web on one port over TLS or mTLS, an admin server for probes and
// metrics, caller identity from SPIFFE client certificates with a
// per-procedure access policy, and HTTP/2 clients for calling the services.
//
// A service's main and composition root use it like this:
//
//	opts := platform.NewServerOptions()
//	opts.Addr = ":9902"
//	opts.AddFlags(fs, "")
//	// fs.Parse(...); opts.Validate() runs again in NewServer.
//	srv, err := platform.NewServer(opts, logger, platform.NewRegistry())
//	if err != nil { ... }
//	srv.Handle(ingestv1connect.NewIngestServiceHandler(impl, srv.HandlerOptions()...))
//	srv.RegisterServices(ingestv1connect.IngestServiceName)
//	srv.AddAccessPolicy(platform.AccessPolicy{
//		"/meshplane.ingest.v1.IngestService/": platform.AllowCluster,
//	})
//	srv.SetReady(true) // once the service can do its work
//	return srv.Run(ctx)
//
// Handlers read the caller with IdentityFromContext or ClusterFromContext.
// Authorization happens before any handler runs: a procedure that no policy
// names admits any verified identity, and only AllowPublic admits callers
// without a certificate. Package platformtest makes certificates and serves
// a Server on loopback for tests.
package platform
