package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/libs/platform"
)

func versionCmd(w io.Writer) int {
	fmt.Fprintf(w, "meshctl %s\n", platform.Version)
	return 0
}

// checkCmd asks the management plane whether it serves, and which clusters
// have pushed and acknowledged.
func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("meshctl check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := platform.NewClientOptions()
	opts.Addr = "localhost:9900"
	opts.AddFlags(fs, "")
	pkiDir := fs.String("pki-dir", "", "directory written by 'meshplane all-in-one --dev-pki-dir': use its CA and meshctl certificate")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *pkiDir != "" {
		opts.CAFile = filepath.Join(*pkiDir, "ca", "root.crt")
		opts.CertFile = filepath.Join(*pkiDir, "meshctl.crt")
		opts.KeyFile = filepath.Join(*pkiDir, "meshctl.key")
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "meshctl check: %v\nhint: pass --ca-file, --cert-file and --key-file, or --pki-dir\n", err)
		return 2
	}
	httpClient, err := platform.NewHTTPClient(opts, nil)
	if err != nil {
		fmt.Fprintf(stderr, "meshctl check: %v\n", err)
		return 1
	}
	base := platform.BaseURL(opts)
	copts := platform.DefaultClientOptions(opts)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()

	ok := true
	health := grpchealth.NewClient(httpClient, base, copts...)
	for _, svc := range []string{"", ingestv1connect.IngestServiceName, distributionv1connect.DistributionServiceName} {
		name := svc
		if name == "" {
			name = "server"
		}
		res, err := health.Check(ctx, &grpchealth.CheckRequest{Service: svc})
		switch {
		case err != nil:
			ok = false
			fmt.Fprintf(stdout, "%-45s ERROR %v\n", name, hint(err))
		case res.Status != grpchealth.StatusServing:
			ok = false
			fmt.Fprintf(stdout, "%-45s %s\n", name, res.Status)
		default:
			fmt.Fprintf(stdout, "%-45s SERVING\n", name)
		}
	}

	ingest := ingestv1connect.NewIngestServiceClient(httpClient, base, copts...)
	dist := distributionv1connect.NewDistributionServiceClient(httpClient, base, copts...)
	clusters, err := ingest.ListClusters(ctx, connect.NewRequest(&ingestv1.ListClustersRequest{}))
	if err != nil {
		fmt.Fprintf(stdout, "\nclusters: ERROR %v\n", hint(err))
		return 1
	}
	acks, err := dist.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
	if err != nil {
		fmt.Fprintf(stdout, "\nacks: ERROR %v\n", hint(err))
		return 1
	}
	byCluster := map[string]*distributionv1.ClusterAck{}
	for _, a := range acks.Msg.GetClusters() {
		byCluster[a.GetCluster()] = a
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPUSH\tINPUT VERSION\tLAST PUSH\tPULL\tAPPLIED\tAPPLY ERRORS")
	for _, c := range clusters.Msg.GetClusters() {
		a := byCluster[c.GetCluster()]
		push := "disconnected"
		if c.GetConnected() {
			push = "connected"
		}
		pull := "disconnected"
		if a.GetConnected() {
			pull = "connected"
		}
		applied := "-"
		if a.GetAckedVersion() != "" {
			applied = "behind"
			if a.GetAckedVersion() == a.GetLatestVersion() {
				applied = "current"
			}
		}
		last := "-"
		if c.GetLastPush() != nil {
			last = time.Since(c.GetLastPush().AsTime()).Round(time.Second).String() + " ago"
		}
		if !c.GetConnected() || !a.GetConnected() || applied != "current" || a.GetApplyErrors() > 0 {
			ok = false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", c.GetCluster(), push, short(c.GetVersion()), last, pull, applied, a.GetApplyErrors())
	}
	tw.Flush()
	if !ok {
		return 1
	}
	return 0
}

func short(v string) string {
	if len(v) > 19 {
		return v[:19]
	}
	return v
}

// hint adds what to do about the errors an operator meets first.
func hint(err error) string {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return err.Error() + " (hint: use a management-plane service certificate: --cert-file/--key-file or --pki-dir)"
	case connect.CodeUnavailable:
		var ce *connect.Error
		if errors.As(err, &ce) {
			return err.Error() + " (hint: is the management plane running at --addr, and is --ca-file its CA?)"
		}
	}
	return err.Error()
}
