package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

const snapshotUsage = `usage: meshctl snapshot dump --cluster NAME [--input | --output] [-o json|yaml] [client flags]

Prints a cluster's latest input snapshot (what its agent discovered and
pushed, from ingest) or output snapshot (the Istio objects and statuses
Meshplane holds for it, from translation), with specs shown as JSON.
`

func snapshotCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprint(stderr, snapshotUsage)
		return 2
	}
	const name = "meshctl snapshot dump"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	cluster := fs.String("cluster", "", "the workload cluster")
	input := fs.Bool("input", false, "dump the input snapshot")
	output := fs.Bool("output", false, "dump the output snapshot (the default)")
	format := fs.String("o", "yaml", "output format: json or yaml")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	switch {
	case *cluster == "":
		fmt.Fprintf(stderr, "%s: name the cluster: --cluster NAME\n", name)
		return 2
	case *input && *output:
		fmt.Fprintf(stderr, "%s: choose one of --input and --output\n", name)
		return 2
	case *format != "json" && *format != "yaml":
		fmt.Fprintf(stderr, "%s: -o must be json or yaml, not %q\n", name, *format)
		return 2
	}
	hc, ok := cf.httpClient(name, stderr)
	if !ok {
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	base, opts := platform.BaseURL(cf.opts), platform.DefaultClientOptions(cf.opts)
	var snap proto.Message
	if *input {
		res, err := ingestv1connect.NewIngestServiceClient(hc, base, opts...).GetInputSnapshot(ctx, connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: *cluster}))
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, hint(err))
			return 1
		}
		snap = res.Msg.GetSnapshot()
	} else {
		res, err := translationv1connect.NewTranslationServiceClient(hc, base, opts...).GetOutputSnapshot(ctx, connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: *cluster}))
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, hint(err))
			return 1
		}
		snap = res.Msg.GetSnapshot()
	}
	b, err := snapshots.RenderJSON(snap)
	if err == nil && *format == "yaml" {
		b, err = yaml.JSONToYAML(b)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	_, _ = stdout.Write(b)
	if *format == "json" {
		fmt.Fprintln(stdout)
	}
	return 0
}
