package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/spf13/cobra"
)

// clientFlags are the flags every management-plane command shares: the
// platform client options (each also read from $MESHPLANE_<FLAG>) and
// --pki-dir.
type clientFlags struct {
	opts   platform.ClientOptions
	pkiDir string
	extra  *platform.Flags
	// cmd is the command the flags are on, to see which were given and
	// the global --context.
	cmd *cobra.Command
}

func addClientFlags(cmd *cobra.Command) *clientFlags {
	c := &clientFlags{opts: platform.NewClientOptions(), cmd: cmd}
	c.opts.Addr = "localhost:9900"
	gfs := flag.NewFlagSet(cmd.Name(), flag.ContinueOnError)
	c.opts.AddFlags(gfs, "")
	c.extra = platform.NewFlags(gfs, "")
	c.extra.String(&c.pkiDir, "pki-dir", "directory written by 'meshplane all-in-one --dev-pki-dir': use its CA and meshctl certificate")
	cmd.Flags().AddGoFlagSet(gfs)
	return c
}

// conn is a ready client connection to the management plane.
type conn struct {
	hc   *http.Client
	base string
	opts []connect.ClientOption
	addr string
}

// connect builds the mTLS client after the flags are parsed: flags, then
// $MESHPLANE_<FLAG> variables, then --pki-dir, then the meshctl context
// (config.go), then the defaults. Bad flags are usage errors with a hint.
func (c *clientFlags) connect() (*conn, error) {
	n, ok, err := selectedContext(c.cmd)
	if err != nil {
		return nil, err
	}
	if ok {
		c.applyContext(n)
	}
	if c.pkiDir != "" {
		c.opts.CAFile = filepath.Join(c.pkiDir, "ca", "root.crt")
		c.opts.CertFile = filepath.Join(c.pkiDir, "meshctl.crt")
		c.opts.KeyFile = filepath.Join(c.pkiDir, "meshctl.key")
	}
	if err := errors.Join(c.opts.Validate(), c.extra.Err()); err != nil {
		return nil, usagef("%v\nhint: pass --addr, and --ca-file, --cert-file and --key-file, or --pki-dir, or use a context (`meshctl config --help`)", err)
	}
	hc, err := platform.NewHTTPClient(c.opts, nil)
	if err != nil {
		return nil, usagef("%v\nhint: --ca-file, --cert-file and --key-file must be readable PEM files", err)
	}
	return &conn{hc: hc, base: platform.BaseURL(c.opts), opts: platform.DefaultClientOptions(c.opts), addr: c.opts.Addr}, nil
}

func (c *conn) close() { c.hc.CloseIdleConnections() }

// callError turns a failed call to service into an error that says what to
// do about it.
func (c *conn) callError(service string, err error) error {
	return callErr{errors.New(hintFor(service, c.addr, err))}
}

// callErr is a failed call to the management plane (exit 1), whatever its
// message says.
type callErr struct{ error }

func (e callErr) Unwrap() error { return e.error }

// hintFor adds what to do about the errors an operator meets first, for a
// call to service (empty: the management plane) at addr.
func hintFor(service, addr string, err error) string {
	what := "the management plane"
	if service != "" {
		what = service
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return err.Error() + "\nhint: use a management-plane service certificate (--cert-file/--key-file or --pki-dir); an agent's certificate is refused"
	case connect.CodeUnavailable:
		if connect.IsWireError(err) {
			return storeHint(what, addr, err)
		}
		where := ""
		if addr != "" {
			where = " at " + addr
		}
		msg := fmt.Sprintf("cannot reach %s%s: %v\nhint: is the management plane running, and is --addr right? try `meshctl check`", what, where, err)
		if strings.Contains(err.Error(), "certificate") {
			msg += "; is --ca-file the CA of its certificate?"
		}
		return msg
	case connect.CodeUnimplemented:
		return fmt.Sprintf("%s%s does not serve this call: %v\nhint: is --addr a management service that serves it, and is it as new as meshctl? try `meshctl version`", what, map[bool]string{true: " at " + addr, false: ""}[addr != ""], err)
	}
	return err.Error()
}

// storeHint is the message for Unavailable sent by the server itself: the
// plane answered, so it runs and --addr is right; what it cannot reach is
// behind it, its store (Redis) in every case the services return today.
func storeHint(what, addr string, err error) string {
	where := ""
	if addr != "" {
		where = " at " + addr
	}
	store := "its store (Redis)"
	if msg := strings.ToLower(err.Error()); strings.Contains(msg, "redis") {
		store = "Redis"
	}
	return fmt.Sprintf("%s%s answered, but cannot reach %s: %v\nhint: the management plane is running and --addr is right; is Redis up, and reachable from the management plane at its --redis-addrs? the plane's log and /readyz on its admin port say more", what, where, store, err)
}

// completeClusters completes a cluster name from what the management plane
// knows, with the client flags already on the command line. Completion
// stays quiet when the plane cannot be reached.
func (c *clientFlags) completeClusters(fromRegistration bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		conn, err := c.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer conn.close()
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var names []string
		if fromRegistration {
			res, err := conn.clusters().ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
			if err == nil {
				for _, cl := range res.Msg.GetClusters() {
					names = append(names, cl.GetName())
				}
			}
		} else {
			res, err := translationv1connect.NewTranslationServiceClient(conn.hc, conn.base, conn.opts...).GetStatus(ctx, connect.NewRequest(&translationv1.GetStatusRequest{}))
			if err == nil {
				names = slices.Sorted(maps.Keys(res.Msg.GetOutputVersions()))
			}
		}
		out := make([]cobra.Completion, 0, len(names))
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
