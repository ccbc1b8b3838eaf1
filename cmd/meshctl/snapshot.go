package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

func newSnapshotCmd() *cobra.Command {
	return newGroupCmd("snapshot", "Dump a cluster's input or output snapshot", "", newSnapshotDumpCmd())
}

func newSnapshotDumpCmd() *cobra.Command {
	var (
		cluster       string
		input, output bool
	)
	cmd := &cobra.Command{
		Use:   "dump --cluster NAME [--input | --output]",
		Short: "Print a cluster's latest input or output snapshot",
		Long: `Print a cluster's latest input snapshot (what its agent discovered and
pushed, from ingest) or output snapshot (the Istio objects and statuses
Meshplane holds for it, from translation), with specs shown as JSON.
-o table lists the objects only.`,
		Example: `  meshctl snapshot dump --cluster east --pki-dir .dev-pki
  meshctl snapshot dump --cluster east --input -o json | jq '.destinations[].metadata.name'
  meshctl snapshot dump --cluster east -o table`,
		Args: noArgs,
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&cluster, "cluster", "", "the workload cluster")
	_ = cmd.RegisterFlagCompletionFunc("cluster", cf.completeClusters(false))
	cmd.Flags().BoolVar(&input, "input", false, "dump the input snapshot")
	cmd.Flags().BoolVar(&output, "output", false, "dump the output snapshot (the default)")
	out := addOutputFlagNamed(cmd, "format", "yaml", "yaml", "json", "table")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case cluster == "":
			return usagef("name the cluster: --cluster NAME")
		case input && output:
			return usagef("choose one of --input and --output")
		}
		if err := out.validate(); err != nil {
			return err
		}
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		var snap proto.Message
		if input {
			res, err := ingestv1connect.NewIngestServiceClient(c.hc, c.base, c.opts...).GetInputSnapshot(ctx, connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: cluster}))
			if err != nil {
				return c.callError("ingest", err)
			}
			snap = res.Msg.GetSnapshot()
		} else {
			res, err := translationv1connect.NewTranslationServiceClient(c.hc, c.base, c.opts...).GetOutputSnapshot(ctx, connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: cluster}))
			if err != nil {
				return c.callError("translation", err)
			}
			snap = res.Msg.GetSnapshot()
		}
		w := cmd.OutOrStdout()
		if out.format == "table" {
			return snapshotTable(w, snap)
		}
		b, err := snapshots.RenderJSON(snap)
		if err == nil && out.format == "yaml" {
			b, err = yaml.JSONToYAML(b)
		}
		if err != nil {
			return fmt.Errorf("encode snapshot: %w", err)
		}
		_, _ = w.Write(b)
		if out.format == "json" {
			fmt.Fprintln(w)
		}
		return nil
	}
	return cmd
}

// snapshotTable lists a snapshot's objects, one a line.
func snapshotTable(w io.Writer, m proto.Message) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch s := m.(type) {
	case *snapshotv1.OutputSnapshot:
		fmt.Fprintf(tw, "cluster %s, version %s\n\n", s.GetCluster(), short(s.GetVersion()))
		fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tSTATE")
		for _, o := range s.GetObjects() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\n", o.GetKind(), dash(o.GetNamespace()), o.GetName())
		}
		for _, st := range s.GetStatuses() {
			fmt.Fprintf(tw, "%s (status)\t%s\t%s\t%s\n", st.GetKind(), dash(st.GetNamespace()), st.GetName(), statusState(st.GetStatus()))
		}
	case *snapshotv1.InputSnapshot:
		fmt.Fprintf(tw, "cluster %s, version %s\n\n", s.GetCluster(), short(s.GetVersion()))
		fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME")
		row := func(kind string, md *commonv1.ObjectMeta) {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", kind, dash(md.GetNamespace()), md.GetName())
		}
		for _, o := range s.GetMeshes() {
			row("Mesh", o.GetMetadata())
		}
		for _, o := range s.GetWorkloads() {
			row("Workload", o.GetMetadata())
		}
		for _, o := range s.GetDestinations() {
			row("Destination", o.GetMetadata())
		}
		for _, o := range s.GetVirtualMeshes() {
			row("VirtualMesh", o.GetMetadata())
		}
		for _, o := range s.GetTrafficPolicies() {
			row("TrafficPolicy", o.GetMetadata())
		}
		for _, o := range s.GetAccessPolicies() {
			row("AccessPolicy", o.GetMetadata())
		}
		for _, o := range s.GetVirtualDestinations() {
			row("VirtualDestination", o.GetMetadata())
		}
		for _, o := range s.GetSettings() {
			row("Settings", o.GetMetadata())
		}
	}
	return nil
}

// statusState reads the state out of a status block's JSON.
func statusState(raw []byte) string {
	var st struct {
		State string `json:"state"`
	}
	if json.Unmarshal(raw, &st) != nil || st.State == "" {
		return commonv1.ApprovalState_PENDING.String()
	}
	return st.State
}
