package main

import (
	"context"
	"errors"
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
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/spf13/cobra"
)

// unknownVersion is what version reports for a service whose answer
// carried no version: a caller without a certificate, or an older server.
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

Each service's version comes from the Meshplane-Server-Version header of a
read-only call to it, which servers send only to callers with a verified
certificate; without one, or from an older server, it shows as "unknown".
An unreachable server is reported, not an error: the exit code is 0 when
the client version could be printed.`,
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
	versions := probeVersions(ctx, c, sv)
	for i, s := range sv.Services {
		if v := versions[s.Service]; v != "" {
			sv.Services[i].Version = v
		}
	}
	return sv
}

// probeVersions calls one read-only RPC of each service at the address and
// reads the build version from the Meshplane-Server-Version header, which
// servers send to callers with a verified certificate. Behind a front door
// that routes by path, each answer comes from that service's own process.
// It also collects the agents' versions from registration.
func probeVersions(ctx context.Context, c *conn, sv *serverVersions) map[string]string {
	versions := map[string]string{}
	served := func(name string) bool {
		return slices.ContainsFunc(sv.Services, func(s serviceVersion) bool { return s.Service == name })
	}
	fromErr := func(err error) string {
		if ce := (*connect.Error)(nil); errors.As(err, &ce) {
			return ce.Meta().Get(platform.VersionHeader)
		}
		return ""
	}
	if served(registrationv1connect.ClusterServiceName) {
		res, err := c.clusters().ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
		if err != nil {
			versions[registrationv1connect.ClusterServiceName] = fromErr(err)
		} else {
			versions[registrationv1connect.ClusterServiceName] = res.Header().Get(platform.VersionHeader)
			for _, cl := range res.Msg.GetClusters() {
				if cl.GetAgentVersion() != "" {
					sv.Agents = append(sv.Agents, agentVersion{Cluster: cl.GetName(), Version: cl.GetAgentVersion()})
				}
			}
		}
		// Registration serves both of its services from one process, and
		// RegistrationService has no call to make without a token.
		versions[registrationv1connect.RegistrationServiceName] = versions[registrationv1connect.ClusterServiceName]
	}
	if served(ingestv1connect.IngestServiceName) {
		res, err := ingestv1connect.NewIngestServiceClient(c.hc, c.base, c.opts...).ListClusters(ctx, connect.NewRequest(&ingestv1.ListClustersRequest{}))
		versions[ingestv1connect.IngestServiceName] = headerOr(res, err, fromErr)
	}
	if served(translationv1connect.TranslationServiceName) {
		res, err := translationv1connect.NewTranslationServiceClient(c.hc, c.base, c.opts...).GetStatus(ctx, connect.NewRequest(&translationv1.GetStatusRequest{}))
		versions[translationv1connect.TranslationServiceName] = headerOr(res, err, fromErr)
	}
	if served(distributionv1connect.DistributionServiceName) {
		res, err := distributionv1connect.NewDistributionServiceClient(c.hc, c.base, c.opts...).ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
		versions[distributionv1connect.DistributionServiceName] = headerOr(res, err, fromErr)
	}
	return versions
}

func headerOr[T any](res *connect.Response[T], err error, fromErr func(error) string) string {
	if err != nil {
		return fromErr(err)
	}
	return res.Header().Get(platform.VersionHeader)
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
	if slices.ContainsFunc(sv.Services, func(s serviceVersion) bool { return s.Version == unknownVersion }) {
		fmt.Fprintln(w, "  (services send their version only to callers with a verified certificate: pass --cert-file/--key-file or --pki-dir)")
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
