// Command agent runs Meshplane's agent in a workload cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/agent/service"
)

func main() {
	logOpts := platform.NewLogOptions()
	logOpts.AddFlags(flag.CommandLine, "")
	cfg := service.DefaultConfig()
	cfg.AddFlags(flag.CommandLine)
	flag.Parse()
	if err := logOpts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(2)
	}
	log := logOpts.NewLogger(os.Stderr)
	agent, err := service.New(cfg, service.WithLogger(log))
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent: invalid options:\n%v\n", err)
		os.Exit(2)
	}
	// The first apply of a large output makes much garbage: collect more
	// often near the container's limit rather than be killed by it.
	if limit, reason, err := platform.SoftMemoryLimit(cfg.MemoryLimitPercent); err != nil {
		log.Warn("no soft memory limit", "error", err)
	} else {
		log.Info("soft memory limit", "bytes", limit, "from", reason)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx); err != nil {
		log.Error("agent stopped with an error", "error", err)
		os.Exit(1)
	}
}
