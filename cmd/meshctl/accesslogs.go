package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

func newAccessLogsCmd() *cobra.Command {
	var (
		req     ingestv1.WatchAccessLogsRequest
		minCode int
		tail    int
	)
	cmd := &cobra.Command{
		Use:   "accesslogs [--follow] [--cluster C] [-n NS] [--workload PREFIX] [--policy NS/NAME] [--min-code N] [--tail N]",
		Short: "Print the Envoy access logs that agents collected",
		Long: `Print the access-log entries that the agents' Envoy Access Log Service
sinks kept (as AccessLogPolicies select them) and forwarded to ingest:
first up to --tail of the entries ingest holds, oldest first, then, with
--follow, new ones as they arrive, until interrupted. Every ingest replica
sees every replica's entries when they share Redis.

-o table prints one line per entry; -o json and -o yaml print one
document per entry (JSON lines, or YAML separated by ---), so that the
output can be piped while following.`,
		Example: `  meshctl accesslogs --pki-dir .dev-pki
  meshctl accesslogs --follow --cluster east -n bookinfo --workload reviews- --min-code 500
  meshctl accesslogs --policy ops/errors --tail 50 -o json | jq .path`,
		Args: noArgs,
	}
	cf := addClientFlags(cmd)
	fs := cmd.Flags()
	fs.BoolVarP(&req.Follow, "follow", "f", false, "keep printing new entries as they arrive")
	fs.StringVar(&req.Cluster, "cluster", "", "only entries of this workload cluster")
	_ = cmd.RegisterFlagCompletionFunc("cluster", cf.completeClusters(false))
	fs.StringVarP(&req.Namespace, "namespace", "n", "", "only entries of workloads in this namespace")
	fs.StringVar(&req.Workload, "workload", "", "only entries of pods whose name starts with this prefix")
	fs.StringVar(&req.Policy, "policy", "", "only entries kept by this AccessLogPolicy, as NAMESPACE/NAME")
	fs.IntVar(&minCode, "min-code", 0, "only entries with at least this response code (e.g. 500)")
	fs.IntVar(&tail, "tail", 100, "how many buffered entries to print first (0: none)")
	out := addOutputFlag(cmd, "table", "table", "json", "yaml")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		switch {
		case minCode < 0 || minCode > 999:
			return usagef("--min-code must be between 0 and 999, not %d", minCode)
		case tail < 0:
			return usagef("--tail must not be negative, not %d", tail)
		case req.Policy != "" && strings.Count(req.Policy, "/") != 1:
			return usagef("--policy must be NAMESPACE/NAME, not %q", req.Policy)
		case !req.Follow && tail == 0:
			return usagef("nothing to print: --tail 0 without --follow")
		}
		req.MinResponseCode, req.Tail = uint32(minCode), uint32(tail)
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx := cmd.Context()
		if !req.Follow {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
		}
		stream, err := ingestv1connect.NewIngestServiceClient(c.hc, c.base, c.opts...).WatchAccessLogs(ctx, connect.NewRequest(&req))
		if err != nil {
			return c.callError("ingest", err)
		}
		defer stream.Close()
		p := newEntryPrinter(cmd.OutOrStdout(), out.format)
		for stream.Receive() {
			if err := p.print(stream.Msg().GetEntries()); err != nil {
				return err
			}
		}
		err = stream.Err()
		if req.Follow && (errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled) && ctx.Err() != nil {
			p.sayIfNone(cmd.ErrOrStderr(), filtered(cmd))
			return nil // interrupted: the normal end of --follow
		}
		if err != nil {
			return c.callError("ingest", err)
		}
		p.sayIfNone(cmd.ErrOrStderr(), filtered(cmd))
		return nil
	}
	return cmd
}

// entryPrinter prints entries as they arrive: a table whose header comes
// once, or one JSON or YAML document per entry.
type entryPrinter struct {
	w       io.Writer
	format  string
	header  bool
	printed int
}

// sayIfNone tells, on stderr so that stdout stays empty for scripts, that
// nothing matched: an empty output would look like a hang or a bug.
func (p *entryPrinter) sayIfNone(w io.Writer, filtered bool) {
	if p.printed > 0 {
		return
	}
	if filtered {
		fmt.Fprintln(w, "no access-log entries match the filters")
		return
	}
	fmt.Fprintln(w, "no access-log entries (an AccessLogPolicy selects the workloads whose entries agents collect)")
}

// filtered reports whether a flag narrowed the entries.
func filtered(cmd *cobra.Command) bool {
	for _, f := range []string{"cluster", "workload", "namespace", "policy", "min-code"} {
		if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
			return true
		}
	}
	return false
}

func newEntryPrinter(w io.Writer, format string) *entryPrinter {
	return &entryPrinter{w: w, format: format}
}

// entryJSON writes one entry per line: protojson emits no newlines
// unless Multiline is set.
var entryJSON = protojson.MarshalOptions{}

func (p *entryPrinter) print(entries []*observabilityv1.AccessLogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	p.printed += len(entries)
	switch p.format {
	case "json":
		for _, e := range entries {
			b, err := entryJSON.Marshal(e)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "%s\n", b); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for _, e := range entries {
			b, err := entryJSON.Marshal(e)
			if err != nil {
				return err
			}
			y, err := yaml.JSONToYAML(b)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "---\n%s", y); err != nil {
				return err
			}
		}
		return nil
	}
	// Fixed column widths rather than a tabwriter: entries arrive batch by
	// batch while following, and every line must line up with the header.
	const row = "%-24s  %-12s  %-32s  %-7s  %-40s  %4s  %s\n"
	if !p.header {
		p.header = true
		if _, err := fmt.Fprintf(p.w, row, "TIME", "CLUSTER", "WORKLOAD", "METHOD", "PATH", "CODE", "DURATION"); err != nil {
			return err
		}
	}
	for _, e := range entries {
		when := "-"
		if ts := e.GetStartTime(); ts != nil {
			when = ts.AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
		}
		dur := "-"
		if d := e.GetDuration(); d != nil {
			dur = d.AsDuration().String()
		}
		workload := e.GetWorkload().GetName()
		if ns := e.GetWorkload().GetNamespace(); ns != "" {
			workload = ns + "/" + workload
		}
		code := "-"
		if e.GetResponseCode() != 0 {
			code = fmt.Sprint(e.GetResponseCode())
		}
		if _, err := fmt.Fprintf(p.w, row, when, dashIfEmpty(e.GetCluster()), dashIfEmpty(workload), dashIfEmpty(e.GetMethod()), dashIfEmpty(e.GetPath()), code, dur); err != nil {
			return err
		}
	}
	return nil
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
