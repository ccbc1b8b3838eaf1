// Command registration runs Meshplane's registration service.
package main

import (
	"flag"
	"log/slog"
	"os"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/registration/service"
	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	srvOpts := platform.NewServerOptions()
	srvOpts.Addr = ":9901"
	srvOpts.AdminAddr = ":9991"
	srvOpts.TrustDomain = pki.DefaultTrustDomain
	// Register is called before the agent has a certificate.
	srvOpts.TLS.ClientAuth = platform.ClientAuthOptional
	srvOpts.AddFlags(flag.CommandLine, "")
	logOpts := platform.NewLogOptions()
	logOpts.AddFlags(flag.CommandLine, "")
	cfg := service.DefaultConfig()
	cfg.AddFlags(flag.CommandLine)
	flag.Parse()
	// One trust domain: the one the server accepts identities of is the
	// one registration signs for.
	cfg.TrustDomain = srvOpts.TrustDomain

	os.Exit(platform.RunMain(service.Name, srvOpts, logOpts, func(log *slog.Logger, reg *prometheus.Registry) (platform.Component, error) {
		return service.New(cfg, service.WithLogger(log), service.WithRegisterer(reg))
	}))
}
