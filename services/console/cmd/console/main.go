// Command console runs Meshplane's operator console: the browser UI and
// the ConsoleService behind it, on its own HTTPS listener, with health,
// readiness and metrics on the admin listener.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/console/service"
)

func main() { os.Exit(run()) }

func run() int {
	cfg := service.DefaultConfig()
	cfg.AddFlags(flag.CommandLine)
	logOpts := platform.NewLogOptions()
	logOpts.AddFlags(flag.CommandLine, "")
	// The admin server of the platform serves /healthz, /readyz and
	// /metrics; its RPC side is not used (the console has its own
	// listener), so it is plaintext on an address nobody dials.
	admin := platform.NewServerOptions()
	admin.Addr, admin.AdminAddr, admin.TLS = "127.0.0.1:0", ":9995", platform.TLSOptions{Plaintext: true}
	platform.NewFlags(flag.CommandLine, "").String(&admin.AdminAddr, "admin-addr", "address of the admin HTTP server (/healthz, /readyz, /metrics)")
	flag.Parse()
	if err := errors.Join(cfg.Validate(), logOpts.Validate(), admin.Validate()); err != nil {
		fmt.Fprintf(os.Stderr, "console: invalid options:\n%v\n", err)
		return 2
	}
	log := logOpts.NewLogger(os.Stderr).With("component", service.Name)
	reg := platform.NewRegistry()
	svc, err := service.New(cfg, service.WithLogger(log), service.WithRegisterer(reg))
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	srv, err := platform.NewServer(admin, log, reg)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	adminLn, err := platform.Listen(ctx, admin.AdminAddr)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	srv.SetReady(true)
	if err := platform.RunAll(ctx, func(ctx context.Context) error { return srv.ServeAdmin(ctx, adminLn) }, svc.Run); err != nil {
		log.Error("stopped with an error", "error", err)
		return 1
	}
	return 0
}
