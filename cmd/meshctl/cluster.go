package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const clusterUsage = `usage: meshctl cluster <command> [flags]

commands:
  register    create a cluster (or a new token for it) and print the agent's helm install line
  approve     let a pending cluster register
  deregister  revoke a cluster's certificates; it is refused on its next call
  list        list clusters (-o table|json)

Every command takes the client flags of 'meshctl check' (--addr, --ca-file,
--cert-file, --key-file or --pki-dir) and a management service certificate:
an agent's certificate is refused.
`

// clusterCmd runs `meshctl cluster <command>`.
func clusterCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return 2
	}
	switch args[0] {
	case "register":
		return clusterRegisterCmd(ctx, args[1:], stdout, stderr)
	case "approve":
		return clusterSimpleCmd(ctx, "approve", args[1:], stdout, stderr)
	case "deregister":
		return clusterSimpleCmd(ctx, "deregister", args[1:], stdout, stderr)
	case "list":
		return clusterListCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, clusterUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "meshctl cluster: unknown command %q\n\n%s", args[0], clusterUsage)
		return 2
	}
}

// clientFlags are the flags every management-plane command shares with
// `meshctl check`.
type clientFlags struct {
	opts   platform.ClientOptions
	pkiDir *string
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	c := &clientFlags{opts: platform.NewClientOptions()}
	c.opts.Addr = "localhost:9900"
	c.opts.AddFlags(fs, "")
	c.pkiDir = fs.String("pki-dir", "", "directory written by 'meshplane all-in-one --dev-pki-dir': use its CA and meshctl certificate")
	return c
}

// client builds a ClusterService client after the flags are parsed.
func (c *clientFlags) client(name string, stderr io.Writer) (registrationv1connect.ClusterServiceClient, *http.Client, bool) {
	hc, ok := c.httpClient(name, stderr)
	if !ok {
		return nil, nil, false
	}
	return registrationv1connect.NewClusterServiceClient(hc, platform.BaseURL(c.opts), platform.DefaultClientOptions(c.opts)...), hc, true
}

// httpClient builds the mTLS client after the flags are parsed, reporting
// bad flags with a hint.
func (c *clientFlags) httpClient(name string, stderr io.Writer) (*http.Client, bool) {
	if *c.pkiDir != "" {
		c.opts.CAFile = filepath.Join(*c.pkiDir, "ca", "root.crt")
		c.opts.CertFile = filepath.Join(*c.pkiDir, "meshctl.crt")
		c.opts.KeyFile = filepath.Join(*c.pkiDir, "meshctl.key")
	}
	if err := c.opts.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\nhint: pass --ca-file, --cert-file and --key-file, or --pki-dir\n", name, err)
		return nil, false
	}
	hc, err := platform.NewHTTPClient(c.opts, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, false
	}
	return hc, true
}

// clusterName takes the cluster from --cluster or the one positional
// argument (`meshctl cluster deregister east`).
func clusterName(fs *flag.FlagSet, flagValue string) (string, error) {
	switch rest := fs.Args(); {
	case flagValue != "" && len(rest) == 0:
		return flagValue, nil
	case flagValue == "" && len(rest) == 1:
		return rest[0], nil
	case flagValue == "" && len(rest) == 0:
		return "", errors.New("name the cluster: --cluster NAME")
	default:
		return "", fmt.Errorf("name one cluster, with --cluster or as the argument; got %q and %q", flagValue, rest)
	}
}

// parseInterspersed parses flags that may come after the positional
// cluster name, as in `meshctl cluster approve east --pki-dir x`.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

func clusterRegisterCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshctl cluster register"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	cluster := fs.String("cluster", "", "name of the workload cluster (a DNS label)")
	requireApproval := fs.Bool("require-approval", false, "leave the cluster pending until 'meshctl cluster approve' (double opt-in)")
	tokenTTL := fs.Duration("token-ttl", 0, "how long the token may be used; default the server's (24h)")
	chart := fs.String("chart", "meshplane/agent", "the agent's Helm chart, as helm install names it")
	namespace := fs.String("namespace", "meshplane", "namespace of the agent in the workload cluster")
	relayAddr := fs.String("relay-addr", "", "management plane address agents dial; default the server's --advertise-addr, else --addr")
	output := fs.String("o", "text", "output: text or json")
	if err := parseInterspersed(fs, args); err != nil {
		return 2
	}
	n, err := clusterName(fs, *cluster)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "%s: -o must be text or json\n", name)
		return 2
	}
	c, hc, ok := cf.client(name, stderr)
	if !ok {
		return 2
	}
	defer hc.CloseIdleConnections()
	req := &registrationv1.CreateClusterRequest{Name: n, RequireApproval: *requireApproval}
	if *tokenTTL > 0 {
		req.TokenTtl = durationpb.New(*tokenTTL)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := c.CreateCluster(ctx, connect.NewRequest(req))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, hint(err))
		return 1
	}
	values := res.Msg.GetHelmValues()
	if values == nil {
		values = map[string]string{}
	}
	if *relayAddr != "" {
		values["relayAddr"] = *relayAddr
	} else if values["relayAddr"] == "" {
		values["relayAddr"] = cf.opts.Addr
	}
	values["bootstrapToken"] = res.Msg.GetToken()
	if *output == "json" {
		out := struct {
			Cluster        json.RawMessage   `json:"cluster"`
			Token          string            `json:"token"`
			TokenExpiresAt time.Time         `json:"tokenExpiresAt"`
			HelmValues     map[string]string `json:"helmValues"`
		}{protoJSON(res.Msg.GetCluster()), res.Msg.GetToken(), res.Msg.GetTokenExpiresAt().AsTime(), values}
		return writeJSON(stdout, stderr, out)
	}
	cl := res.Msg.GetCluster()
	fmt.Fprintf(stdout, "cluster %s: %s\n", cl.GetName(), statusName(cl.GetStatus()))
	fmt.Fprintf(stdout, "bootstrap token (shown once; single use; expires %s):\n  %s\n\n",
		res.Msg.GetTokenExpiresAt().AsTime().Format(time.RFC3339), res.Msg.GetToken())
	if cl.GetStatus() == registrationv1.ClusterStatus_CLUSTER_STATUS_PENDING_APPROVAL {
		fmt.Fprintf(stdout, "The cluster must be approved before it can register: meshctl cluster approve %s\n\n", cl.GetName())
	}
	fmt.Fprintf(stdout, "Install the agent in the workload cluster:\n\n%s", helmInstallLine(*chart, *namespace, values))
	return 0
}

// helmInstallLine prints one command to paste: helm install with the values
// in a heredoc, because the CA bundle spans lines.
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

func clusterSimpleCmd(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	name := "meshctl cluster " + verb
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	cluster := fs.String("cluster", "", "name of the workload cluster")
	if err := parseInterspersed(fs, args); err != nil {
		return 2
	}
	n, err := clusterName(fs, *cluster)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	c, hc, ok := cf.client(name, stderr)
	if !ok {
		return 2
	}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	switch verb {
	case "approve":
		res, err := c.ApproveCluster(ctx, connect.NewRequest(&registrationv1.ApproveClusterRequest{Name: n}))
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, hint(err))
			return 1
		}
		fmt.Fprintf(stdout, "cluster %s: %s\n", n, statusName(res.Msg.GetCluster().GetStatus()))
	default:
		res, err := c.DeregisterCluster(ctx, connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: n}))
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, hint(err))
			return 1
		}
		fmt.Fprintf(stdout, "cluster %s: %s; %d certificate(s) revoked\n", n, statusName(res.Msg.GetCluster().GetStatus()), res.Msg.GetRevokedCertificates())
	}
	return 0
}

func clusterListCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshctl cluster list"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	output := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "%s: -o must be table or json\n", name)
		return 2
	}
	c, hc, ok := cf.client(name, stderr)
	if !ok {
		return 2
	}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := c.ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, hint(err))
		return 1
	}
	if *output == "json" {
		out := make([]json.RawMessage, 0, len(res.Msg.GetClusters()))
		for _, cl := range res.Msg.GetClusters() {
			out = append(out, protoJSON(cl))
		}
		return writeJSON(stdout, stderr, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tSTATUS\tAGENT\tCERT SERIAL\tCERT EXPIRES\tFIRST SEEN\tLAST SEEN")
	for _, cl := range res.Msg.GetClusters() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cl.GetName(), statusName(cl.GetStatus()), dash(cl.GetAgentVersion()),
			dash(short(cl.GetCertificateSerial())), when(cl.GetCertificateExpiresAt()), when(cl.GetFirstSeen()), when(cl.GetLastSeen()))
	}
	tw.Flush()
	return 0
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

func protoJSON(m proto.Message) json.RawMessage {
	b, err := protojson.Marshal(m)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "meshctl: %v\n", err)
		return 1
	}
	return 0
}
