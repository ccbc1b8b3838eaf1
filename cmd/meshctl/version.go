package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/spf13/cobra"
)

// unknownVersion is what version reports for a server: no Meshplane RPC and
// no metric reports the build of a service.
const unknownVersion = "unknown"

type versionReport struct {
	Client struct {
		Version   string `json:"version"`
		GoVersion string `json:"goVersion"`
		Platform  string `json:"platform"`
	} `json:"client"`
	Server *serverVersions `json:"server,omitempty"`
}

type serverVersions struct {
	Addr     string           `json:"addr"`
	Error    string           `json:"error,omitempty"`
	Services []serviceVersion `json:"services"`
	Agents   []agentVersion   `json:"agents,omitempty"`
}

type serviceVersion struct {
	Service string `json:"service"`
	Status  string `json:"status"`
	Version string `json:"version"`
}

type agentVersion struct {
	Cluster string `json:"cluster"`
	Version string `json:"version"`
}

// meshplaneServices are asked for by health check when reflection is not
// allowed (a caller without a certificate).
var meshplaneServices = []string{
	registrationv1connect.RegistrationServiceName, registrationv1connect.ClusterServiceName,
	ingestv1connect.IngestServiceName, translationv1connect.TranslationServiceName, distributionv1connect.DistributionServiceName,
}

func newVersionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client version, and the services and agent versions of the management plane",
		Long: `Print meshctl's version and, unless --client, what the management plane
at --addr serves: each service (through gRPC reflection with a service
certificate, else gRPC health checks), whether it is SERVING, and the agent
version each registered cluster reported.

The management services do not report their own build version (no RPC or
metric carries it), so their version shows as "unknown". An unreachable
server is reported, not an error: the exit code is 0 when the client
version could be printed.`,
		Example: `  meshctl version --client
  meshctl version --pki-dir .dev-pki -o yaml`,
		Args: noArgs,
	}
	cf := addClientFlags(cmd)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the client version only")
	out := addOutputFlag(cmd, "table", "table", "yaml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		var rep versionReport
		rep.Client.Version, rep.Client.GoVersion, rep.Client.Platform = platform.Version, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
		if !clientOnly {
			c, err := cf.connect()
			if err != nil {
				return err
			}
			defer c.close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			rep.Server = serverVersionsOf(ctx, c)
		}
		w := cmd.OutOrStdout()
		if out.format != "table" {
			return printStructured(w, out.format, rep)
		}
		printVersion(w, rep)
		return nil
	}
	return cmd
}

func serverVersionsOf(ctx context.Context, c *conn) *serverVersions {
	sv := &serverVersions{Addr: c.addr, Services: []serviceVersion{}}
	names, err := reflectServices(ctx, c)
	if err != nil {
		// Reflection needs a certificate; health checks do not.
		names = meshplaneServices
	}
	health := grpchealth.NewClient(c.hc, c.base, c.opts...)
	reached := false
	for _, n := range names {
		res, err := health.Check(ctx, &grpchealth.CheckRequest{Service: n})
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound:
			continue // not served at this address
		case err != nil:
			if !reached && sv.Error == "" {
				sv.Error = hintFor("", c.addr, err)
			}
			continue
		}
		reached = true
		sv.Services = append(sv.Services, serviceVersion{Service: n, Status: strings.ToUpper(res.Status.String()), Version: unknownVersion})
	}
	if reached {
		sv.Error = ""
	}
	if slices.ContainsFunc(sv.Services, func(s serviceVersion) bool { return s.Service == registrationv1connect.ClusterServiceName }) {
		res, err := c.clusters().ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
		if err == nil {
			for _, cl := range res.Msg.GetClusters() {
				if cl.GetAgentVersion() != "" {
					sv.Agents = append(sv.Agents, agentVersion{Cluster: cl.GetName(), Version: cl.GetAgentVersion()})
				}
			}
		}
	}
	return sv
}

// reflectServices lists the Meshplane services served at the address.
func reflectServices(ctx context.Context, c *conn) ([]string, error) {
	stream := grpcreflect.NewClient(c.hc, c.base, c.opts...).NewStream(ctx)
	defer stream.Close()
	list, err := stream.ListServices()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range list {
		if strings.HasPrefix(string(n), "meshplane.") {
			out = append(out, string(n))
		}
	}
	slices.Sort(out)
	return out, nil
}

func printVersion(w io.Writer, rep versionReport) {
	fmt.Fprintf(w, "Client: meshctl %s (%s, %s)\n", rep.Client.Version, rep.Client.GoVersion, rep.Client.Platform)
	sv := rep.Server
	if sv == nil {
		return
	}
	if sv.Error != "" {
		fmt.Fprintf(w, "Server: %s: %s\n", sv.Addr, sv.Error)
		return
	}
	fmt.Fprintf(w, "Server: %s\n", sv.Addr)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICE\tSTATUS\tVERSION")
	for _, s := range sv.Services {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Service, s.Status, s.Version)
	}
	tw.Flush()
	if len(sv.Services) > 0 {
		fmt.Fprintln(w, "  (services do not report their build version yet)")
	}
	if len(sv.Agents) > 0 {
		fmt.Fprintln(w, "Agents:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  CLUSTER\tVERSION")
		for _, a := range sv.Agents {
			fmt.Fprintf(tw, "  %s\t%s\n", a.Cluster, a.Version)
		}
		tw.Flush()
	}
}
