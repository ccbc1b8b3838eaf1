package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func newClusterCmd() *cobra.Command {
	return newGroupCmd("cluster", "Register, approve, deregister and list workload clusters", `Register, approve, deregister and list workload clusters.

Every command takes the client flags (--addr, --ca-file, --cert-file,
--key-file or --pki-dir) and a management service certificate: an agent's
certificate is refused.`,
		newClusterRegisterCmd(), newClusterSimpleCmd("approve"), newClusterSimpleCmd("deregister"), newClusterListCmd())
}

// clusterName takes the cluster from --cluster or the one positional
// argument (`meshctl cluster deregister east`).
func clusterName(args []string, flagValue string) (string, error) {
	switch {
	case flagValue != "" && len(args) == 0:
		return flagValue, nil
	case flagValue == "" && len(args) == 1:
		return args[0], nil
	case flagValue == "" && len(args) == 0:
		return "", usagef("name the cluster: --cluster NAME")
	default:
		return "", usagef("name one cluster, with --cluster or as the argument; got %q and %q", flagValue, args)
	}
}

func (c *conn) clusters() registrationv1connect.ClusterServiceClient {
	return registrationv1connect.NewClusterServiceClient(c.hc, c.base, c.opts...)
}

func newClusterRegisterCmd() *cobra.Command {
	var (
		cluster, chart, namespace, relayAddr string
		requireApproval                      bool
		tokenTTL                             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "register [NAME]",
		Short: "Create a cluster (or a new token for it) and print the agent's helm install line",
		Example: `  meshctl cluster register east --pki-dir .dev-pki
  meshctl cluster register --cluster west --require-approval -o json`,
		Args: cobra.MaximumNArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&cluster, "cluster", "", "name of the workload cluster (a DNS label)")
	cmd.Flags().BoolVar(&requireApproval, "require-approval", false, "leave the cluster pending until 'meshctl cluster approve' (double opt-in)")
	cmd.Flags().DurationVar(&tokenTTL, "token-ttl", 0, "how long the token may be used; default the server's (24h)")
	cmd.Flags().StringVar(&chart, "chart", defaultAgentChart, "the agent's Helm chart, as helm install names it: a local directory (a Meshplane checkout or release) or repo/chart")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "meshplane", "namespace of the agent in the workload cluster")
	cmd.Flags().StringVar(&relayAddr, "relay-addr", "", "management plane address agents dial; default the server's --advertise-addr, else --addr")
	out := addOutputFlag(cmd, "text", "text", "json", "yaml")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		n, err := clusterName(args, cluster)
		if err != nil {
			return err
		}
		if err := out.validate(); err != nil {
			return err
		}
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		req := &registrationv1.CreateClusterRequest{Name: n, RequireApproval: requireApproval}
		if tokenTTL > 0 {
			req.TokenTtl = durationpb.New(tokenTTL)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
		defer cancel()
		res, err := c.clusters().CreateCluster(ctx, connect.NewRequest(req))
		if err != nil {
			return c.callError("registration", err)
		}
		values := res.Msg.GetHelmValues()
		if values == nil {
			values = map[string]string{}
		}
		if relayAddr != "" {
			values["relayAddr"] = relayAddr
		} else if values["relayAddr"] == "" {
			values["relayAddr"] = c.addr
		}
		values["bootstrapToken"] = res.Msg.GetToken()
		w := cmd.OutOrStdout()
		if out.format != "text" {
			return printStructured(w, out.format, struct {
				Cluster        json.RawMessage   `json:"cluster"`
				Token          string            `json:"token"`
				TokenExpiresAt time.Time         `json:"tokenExpiresAt"`
				HelmValues     map[string]string `json:"helmValues"`
			}{protoJSON(res.Msg.GetCluster()), res.Msg.GetToken(), res.Msg.GetTokenExpiresAt().AsTime(), values})
		}
		cl := res.Msg.GetCluster()
		fmt.Fprintf(w, "cluster %s: %s\n", cl.GetName(), statusName(cl.GetStatus()))
		fmt.Fprintf(w, "bootstrap token (shown once; single use; expires %s):\n  %s\n\n",
			res.Msg.GetTokenExpiresAt().AsTime().Format(time.RFC3339), res.Msg.GetToken())
		if cl.GetStatus() == registrationv1.ClusterStatus_CLUSTER_STATUS_PENDING_APPROVAL {
			fmt.Fprintf(w, "The cluster must be approved before it can register: meshctl cluster approve %s\n\n", cl.GetName())
		}
		fmt.Fprintf(w, "Install the agent in the workload cluster (kubectl's current context), from a Meshplane checkout or release:\n\n%s", helmInstallLine(chart, namespace, values))
		return nil
	}
	return cmd
}

// defaultAgentChart is the agent's chart in a checkout or a release: the
// charts are published in no Helm repository.
const defaultAgentChart = "./deploy/charts/agent"

// helmInstallLine prints one command to paste: helm install with the values
// in a heredoc, because the CA bundle spans lines. `meshctl install` prints
// the management plane's steps in the same shape.
func helmInstallLine(chart, namespace string, values map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "helm install meshplane-agent %s --namespace %s --create-namespace -f - <<'EOF'\n", chart, namespace)
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := values[k]
		if strings.Contains(v, "\n") {
			fmt.Fprintf(&b, "%s: |\n", k)
			for _, line := range strings.Split(strings.TrimRight(v, "\n"), "\n") {
				fmt.Fprintf(&b, "  %s\n", line)
			}
			continue
		}
		q, _ := json.Marshal(v) // a JSON string is a YAML string
		fmt.Fprintf(&b, "%s: %s\n", k, q)
	}
	b.WriteString("EOF\n")
	return b.String()
}

func newClusterSimpleCmd(verb string) *cobra.Command {
	var cluster string
	short := map[string]string{
		"approve":    "Let a pending cluster register",
		"deregister": "Revoke a cluster's certificates; it is refused on its next call",
	}[verb]
	cmd := &cobra.Command{
		Use:     verb + " [NAME]",
		Short:   short,
		Example: "  meshctl cluster " + verb + " east --pki-dir .dev-pki",
		Args:    cobra.MaximumNArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&cluster, "cluster", "", "name of the workload cluster")
	_ = cmd.RegisterFlagCompletionFunc("cluster", cf.completeClusters(true))
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return cf.completeClusters(true)(cmd, args, prefix)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		n, err := clusterName(args, cluster)
		if err != nil {
			return err
		}
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
		defer cancel()
		w := cmd.OutOrStdout()
		if verb == "approve" {
			res, err := c.clusters().ApproveCluster(ctx, connect.NewRequest(&registrationv1.ApproveClusterRequest{Name: n}))
			if err != nil {
				return c.callError("registration", err)
			}
			fmt.Fprintf(w, "cluster %s: %s\n", n, statusName(res.Msg.GetCluster().GetStatus()))
			return nil
		}
		res, err := c.clusters().DeregisterCluster(ctx, connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: n}))
		if err != nil {
			return c.callError("registration", err)
		}
		fmt.Fprintf(w, "cluster %s: %s; %d certificate(s) revoked\n", n, statusName(res.Msg.GetCluster().GetStatus()), res.Msg.GetRevokedCertificates())
		return nil
	}
	return cmd
}

func newClusterListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List registered clusters",
		Example: "  meshctl cluster list --pki-dir .dev-pki -o yaml",
		Args:    noArgs,
	}
	cf := addClientFlags(cmd)
	out := addOutputFlag(cmd, "table", "table", "yaml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
		defer cancel()
		res, err := c.clusters().ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
		if err != nil {
			return c.callError("registration", err)
		}
		w := cmd.OutOrStdout()
		if out.format != "table" {
			list := make([]json.RawMessage, 0, len(res.Msg.GetClusters()))
			for _, cl := range res.Msg.GetClusters() {
				list = append(list, protoJSON(cl))
			}
			return printStructured(w, out.format, list)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLUSTER\tSTATUS\tAGENT\tCERT SERIAL\tCERT EXPIRES\tFIRST SEEN\tLAST SEEN")
		for _, cl := range res.Msg.GetClusters() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cl.GetName(), statusName(cl.GetStatus()), dash(cl.GetAgentVersion()),
				dash(short(cl.GetCertificateSerial())), when(cl.GetCertificateExpiresAt()), when(cl.GetFirstSeen()), when(cl.GetLastSeen()))
		}
		return tw.Flush()
	}
	return cmd
}

func statusName(s registrationv1.ClusterStatus) string {
	return strings.TrimPrefix(s.String(), "CLUSTER_STATUS_")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

func short(v string) string {
	if len(v) > 19 {
		return v[:19]
	}
	return v
}
