package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// Component is a service that mounts handlers on a Server and runs its
// background loops.
type Component interface {
	Mount(srv *Server)
	Run(ctx context.Context) error
	// RevocationChecker returns the shared revocation set the component
	// follows, or nil when it follows none. RunMain guards the component's
	// own server with it, unless the server's options already name a
	// checker. Every component says, so that none is left unguarded by
	// omission.
	RevocationChecker() RevocationChecker
}

// Builder builds a component with the process's logger and registry.
type Builder func(log *slog.Logger, reg *prometheus.Registry) (Component, error)

// RunMain is the body of a service's main function, after flag parsing: it
// validates the options, builds the logger, the registry, the server and the
// component, and runs them until SIGINT or SIGTERM. It returns the process
// exit code.
func RunMain(name string, srvOpts ServerOptions, logOpts LogOptions, build Builder) int {
	if err := errors.Join(srvOpts.Validate(), logOpts.Validate()); err != nil {
		fmt.Fprintf(os.Stderr, "%s: invalid options:\n%v\n", name, err)
		return 2
	}
	log := logOpts.NewLogger(os.Stderr).With("component", name)
	reg := NewRegistry()
	comp, err := build(log, reg)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	// A component that follows the shared revocation set guards its own
	// server with it.
	if srvOpts.Revocation == nil {
		srvOpts.Revocation = comp.RevocationChecker()
	}
	srv, err := NewServer(srvOpts, log, reg)
	if err != nil {
		log.Error("start failed", "error", err)
		return 1
	}
	comp.Mount(srv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("starting", "addr", srvOpts.Addr, "admin_addr", srvOpts.AdminAddr, "version", Version)
	srv.SetReady(true)
	if err := RunAll(ctx, srv.Run, comp.Run); err != nil {
		log.Error("stopped with an error", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// Version is the build's version, set by the linker:
// -X github.com/meshplane/meshplane/libs/platform.Version=v1.2.3
var Version = "dev"

// registerBuildInfo exports meshplane_build_info{version, go_version} = 1,
// once per registry.
func registerBuildInfo(logger *slog.Logger, reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	g := register(logger, reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshplane_build_info",
		Help: "Always 1; the labels say which build of Meshplane serves.",
	}, []string{"version", "go_version"}))
	g.WithLabelValues(Version, runtime.Version()).Set(1)
}
