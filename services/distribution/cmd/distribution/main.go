// Command distribution runs Meshplane's distribution service.
package main

import (
	"flag"
	"log/slog"
	"os"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/distribution/service"
	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	srvOpts := platform.NewServerOptions()
	srvOpts.Addr = ":9904"
	srvOpts.AdminAddr = ":9994"
	srvOpts.TrustDomain = pki.DefaultTrustDomain
	srvOpts.AddFlags(flag.CommandLine, "")
	logOpts := platform.NewLogOptions()
	logOpts.AddFlags(flag.CommandLine, "")
	cfg := service.DefaultConfig()
	cfg.AddFlags(flag.CommandLine)
	flag.Parse()

	os.Exit(platform.RunMain(service.Name, srvOpts, logOpts, func(log *slog.Logger, reg *prometheus.Registry) (platform.Component, error) {
		return service.New(cfg, service.WithLogger(log), service.WithRegisterer(reg))
	}))
}
