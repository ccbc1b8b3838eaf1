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
	// A flag set of our own: the smallstep authority pulls in
	// github.com/golang/glog (through its badger database drivers), which
	// registers -v, -log_dir and friends on flag.CommandLine at init.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	srvOpts := platform.NewServerOptions()
	srvOpts.Addr = ":9901"
	srvOpts.AdminAddr = ":9991"
	srvOpts.TrustDomain = pki.DefaultTrustDomain
	// Register is called before the agent has a certificate.
	srvOpts.TLS.ClientAuth = platform.ClientAuthOptional
	srvOpts.AddFlags(fs, "")
	logOpts := platform.NewLogOptions()
	logOpts.AddFlags(fs, "")
	cfg := service.DefaultConfig()
	cfg.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	// One trust domain: the one the server accepts identities of is the
	// one registration signs for.
	cfg.TrustDomain = srvOpts.TrustDomain
	// The server asks the service's revocation set about every client
	// certificate; the set exists once the service is built.
	revocation := service.NewRevocationChecker()
	srvOpts.Revocation = revocation

	os.Exit(platform.RunMain(service.Name, srvOpts, logOpts, func(log *slog.Logger, reg *prometheus.Registry) (platform.Component, error) {
		return service.New(cfg, service.WithLogger(log), service.WithRegisterer(reg), service.WithRevocationChecker(revocation))
	}))
}
