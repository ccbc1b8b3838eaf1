// Command meshctl is Meshplane's command line for operators.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `meshctl: operate a Meshplane installation

usage: meshctl <command> [flags]

commands:
  check     show whether the management plane is serving and which clusters are connected
  cluster   register, approve, deregister and list workload clusters
  snapshot  dump a cluster's input or output snapshot
  version   print the client version

Run 'meshctl <command> -h' for a command's flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	switch args[0] {
	case "version":
		return versionCmd(stdout)
	case "check":
		return checkCmd(ctx, args[1:], stdout, stderr)
	case "cluster":
		return clusterCmd(ctx, args[1:], stdout, stderr)
	case "snapshot":
		return snapshotCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return 0
	default:
		fmt.Fprintf(stderr, "meshctl: unknown command %q\n\n%s", args[0], usageText)
		return 2
	}
}
