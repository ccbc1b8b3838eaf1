package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// meshctl keeps named connections to management planes in one file, as
// kubectl keeps clusters in a kubeconfig: a list of contexts and the name
// of the current one. The file is $MESHPLANE_CONFIG, else
// <os.UserConfigDir>/meshplane/config.yaml (~/.config/meshplane/config.yaml
// on Linux). --context (or $MESHPLANE_CONTEXT) picks another context for
// one command; a flag or a $MESHPLANE_<FLAG> variable overrides the field it
// names.

// configEnv names the variable that points meshctl at another config file.
const configEnv = "MESHPLANE_CONFIG"

// contextEnv names the variable that stands in for --context.
const contextEnv = "MESHPLANE_CONTEXT"

// meshctlConfig is the file's content.
type meshctlConfig struct {
	APIVersion     string         `json:"apiVersion,omitempty"`
	Kind           string         `json:"kind,omitempty"`
	CurrentContext string         `json:"current-context,omitempty"`
	Contexts       []namedContext `json:"contexts,omitempty"`
}

const (
	configAPIVersion = "meshplane.dev/v1"
	configKind       = "MeshctlConfig"
)

// namedContext is how to reach one management plane: the client flags'
// values. Relative file names are relative to the config file's directory.
type namedContext struct {
	Name       string `json:"name"`
	Addr       string `json:"addr,omitempty"`
	CAFile     string `json:"ca-file,omitempty"`
	CertFile   string `json:"cert-file,omitempty"`
	KeyFile    string `json:"key-file,omitempty"`
	ServerName string `json:"server-name,omitempty"`
}

// configPath is the file meshctl reads and `meshctl config` writes.
func configPath() (string, error) {
	if p := os.Getenv(configEnv); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config file: %w (set $%s)", err, configEnv)
	}
	return filepath.Join(dir, "meshplane", "config.yaml"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig(path string) (*meshctlConfig, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &meshctlConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read meshctl config: %w", err)
	}
	var c meshctlConfig
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("meshctl config %s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("meshctl config %s: %w", path, err)
	}
	base := filepath.Dir(path)
	for i := range c.Contexts {
		ctx := &c.Contexts[i]
		for _, p := range []*string{&ctx.CAFile, &ctx.CertFile, &ctx.KeyFile} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(base, *p)
			}
		}
	}
	return &c, nil
}

func (c *meshctlConfig) validate() error {
	var errs []error
	if c.APIVersion != "" && c.APIVersion != configAPIVersion {
		errs = append(errs, fmt.Errorf("apiVersion must be %s, got %q", configAPIVersion, c.APIVersion))
	}
	if c.Kind != "" && c.Kind != configKind {
		errs = append(errs, fmt.Errorf("kind must be %s, got %q", configKind, c.Kind))
	}
	seen := map[string]bool{}
	for i, ctx := range c.Contexts {
		switch {
		case ctx.Name == "":
			errs = append(errs, fmt.Errorf("contexts[%d].name is empty", i))
		case seen[ctx.Name]:
			errs = append(errs, fmt.Errorf("contexts[%d].name %q is used twice", i, ctx.Name))
		}
		seen[ctx.Name] = true
		if (ctx.CertFile == "") != (ctx.KeyFile == "") {
			errs = append(errs, fmt.Errorf("contexts[%d] (%s): cert-file and key-file go together; got only one", i, ctx.Name))
		}
	}
	if c.CurrentContext != "" && !seen[c.CurrentContext] {
		errs = append(errs, fmt.Errorf("current-context %q is not in contexts", c.CurrentContext))
	}
	return errors.Join(errs...)
}

func (c *meshctlConfig) context(name string) (namedContext, bool) {
	i := slices.IndexFunc(c.Contexts, func(n namedContext) bool { return n.Name == name })
	if i < 0 {
		return namedContext{}, false
	}
	return c.Contexts[i], true
}

func (c *meshctlConfig) names() []string {
	out := make([]string, 0, len(c.Contexts))
	for _, n := range c.Contexts {
		out = append(out, n.Name)
	}
	return out
}

// setContext adds or replaces a context.
func (c *meshctlConfig) setContext(n namedContext) {
	if i := slices.IndexFunc(c.Contexts, func(o namedContext) bool { return o.Name == n.Name }); i >= 0 {
		c.Contexts[i] = n
		return
	}
	c.Contexts = append(c.Contexts, n)
}

// saveConfig writes the file atomically, readable by its owner only (it
// names key files).
func saveConfig(path string, c *meshctlConfig) error {
	c.APIVersion, c.Kind = configAPIVersion, configKind
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode meshctl config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write meshctl config: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write meshctl config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write meshctl config: %w", err)
	}
	return nil
}

// selectedContext returns the context a command uses: --context or
// $MESHPLANE_CONTEXT, else the file's current-context; ok is false when
// there is none. Naming a context that does not exist is a usage error.
func selectedContext(cmd *cobra.Command) (ctx namedContext, ok bool, err error) {
	name := ""
	if f := cmd.Flag("context"); f != nil && f.Changed {
		name = f.Value.String()
	} else if v := os.Getenv(contextEnv); v != "" {
		name = v
	}
	path, err := configPath()
	if err != nil {
		if name == "" {
			return namedContext{}, false, nil
		}
		return namedContext{}, false, usagef("--context %s: %v", name, err)
	}
	c, err := loadConfig(path)
	if err != nil {
		return namedContext{}, false, usagef("%v\nhint: fix the file, or point $%s at another one", err, configEnv)
	}
	if name == "" {
		name = c.CurrentContext
		if name == "" {
			return namedContext{}, false, nil
		}
	}
	n, found := c.context(name)
	if !found {
		return namedContext{}, false, usagef("no context %q in %s (contexts: %s)\nhint: `meshctl config get-contexts` lists them", name, path, orNone(c.names()))
	}
	return n, true, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// applyContext fills each client option that neither a flag on the command
// line nor its $MESHPLANE_<FLAG> variable gave from the context. With
// --plaintext only the address is taken.
func (c *clientFlags) applyContext(n namedContext) {
	given := func(name string) bool {
		if f := c.cmd.Flags().Lookup(name); f != nil && f.Changed {
			return true
		}
		_, ok := os.LookupEnv(platform.EnvName("", name))
		return ok
	}
	set := func(p *string, name, v string) {
		if v != "" && !given(name) {
			*p = v
		}
	}
	set(&c.opts.Addr, "addr", n.Addr)
	if c.opts.Plaintext {
		return
	}
	// --pki-dir gives the CA and the certificate as a set.
	if c.pkiDir == "" {
		set(&c.opts.CAFile, "ca-file", n.CAFile)
		if !given("cert-file") && !given("key-file") {
			set(&c.opts.CertFile, "cert-file", n.CertFile)
			set(&c.opts.KeyFile, "key-file", n.KeyFile)
		}
	}
	set(&c.opts.ServerName, "server-name", n.ServerName)
}

func newConfigCmd() *cobra.Command {
	return newGroupCmd("config", "Manage meshctl's contexts (connections to management planes)",
		`Manage meshctl's contexts, as kubectl manages its kubeconfig: each context
names a management plane's address, the CA its certificate chains to, a
client certificate and key, and optionally the server name to verify.
Commands that call the management plane use the current context, or the
one --context (or $MESHPLANE_CONTEXT) names; a flag or $MESHPLANE_<FLAG>
variable overrides the field it names.

The file is $MESHPLANE_CONFIG, else `+"`<user config dir>/meshplane/config.yaml`"+`
(~/.config/meshplane/config.yaml on Linux). `+"`make demo`"+` writes its own
file, .demo/meshctl.yaml, and prints the export line that selects it.`,
		newGetContextsCmd(), newCurrentContextCmd(), newUseContextCmd(), newSetContextCmd(), newDeleteContextCmd())
}

func newGetContextsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts; * marks the current one",
		Args:  noArgs,
	}
	out := addOutputFlag(cmd, "table", "table", "name", "yaml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		path, c, err := readConfig()
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		switch out.format {
		case "name":
			for _, n := range c.names() {
				fmt.Fprintln(w, n)
			}
			return nil
		case "yaml", "json":
			return printStructured(w, out.format, c)
		}
		if len(c.Contexts) == 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "no contexts in %s\n", path)
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tADDR\tCERT-FILE")
		for _, n := range c.Contexts {
			cur := ""
			if n.Name == c.CurrentContext {
				cur = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cur, n.Name, n.Addr, n.CertFile)
		}
		return tw.Flush()
	}
	return cmd
}

func newCurrentContextCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the name of the current context",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, c, err := readConfig()
			if err != nil {
				return err
			}
			if c.CurrentContext == "" {
				return fmt.Errorf("no current context in %s\nhint: `meshctl config use-context NAME`", path)
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.CurrentContext)
			return nil
		},
	}
}

func newUseContextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make NAME the current context",
		Args:  exactArgs(1, "a context NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, c, err := readConfig()
			if err != nil {
				return err
			}
			if _, ok := c.context(args[0]); !ok {
				return usagef("no context %q in %s (contexts: %s)", args[0], path, orNone(c.names()))
			}
			c.CurrentContext = args[0]
			if err := saveConfig(path, c); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Switched to context %q.\n", args[0])
			return nil
		},
	}
	cmd.ValidArgsFunction = completeContexts
	return cmd
}

func newSetContextCmd() *cobra.Command {
	var n namedContext
	var use bool
	cmd := &cobra.Command{
		Use:   "set-context NAME",
		Short: "Add a context, or change the fields given of an existing one",
		Example: `  meshctl config set-context prod --addr meshplane.example.com:9900 \
    --ca-file ca.crt --cert-file meshctl.crt --key-file meshctl.key --use`,
		Args: exactArgs(1, "a context NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, c, err := readConfig()
			if err != nil {
				return err
			}
			cur, _ := c.context(args[0])
			cur.Name = args[0]
			for name, p := range map[string]*string{"addr": &cur.Addr, "ca-file": &cur.CAFile, "cert-file": &cur.CertFile, "key-file": &cur.KeyFile, "server-name": &cur.ServerName} {
				f := cmd.Flags().Lookup(name)
				if !f.Changed {
					continue
				}
				v := f.Value.String()
				if v != "" && name != "addr" && name != "server-name" {
					// A file name is kept absolute, so that the context
					// works from any directory.
					if v, err = filepath.Abs(v); err != nil {
						return err
					}
				}
				*p = v
			}
			c.setContext(cur)
			if use || c.CurrentContext == "" {
				c.CurrentContext = cur.Name
			}
			if err := c.validate(); err != nil {
				return usagef("%v", err)
			}
			if err := saveConfig(path, c); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Context %q set in %s.\n", cur.Name, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&n.Addr, "addr", "", "host:port of the management plane")
	cmd.Flags().StringVar(&n.CAFile, "ca-file", "", "PEM bundle the server certificate must chain to")
	cmd.Flags().StringVar(&n.CertFile, "cert-file", "", "PEM client certificate (a management-plane service certificate)")
	cmd.Flags().StringVar(&n.KeyFile, "key-file", "", "PEM private key of the client certificate")
	cmd.Flags().StringVar(&n.ServerName, "server-name", "", "name to verify in the server certificate; empty uses the host of the address")
	cmd.Flags().BoolVar(&use, "use", false, "also make it the current context")
	return cmd
}

func newDeleteContextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Remove a context",
		Args:  exactArgs(1, "a context NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, c, err := readConfig()
			if err != nil {
				return err
			}
			i := slices.IndexFunc(c.Contexts, func(n namedContext) bool { return n.Name == args[0] })
			if i < 0 {
				return usagef("no context %q in %s (contexts: %s)", args[0], path, orNone(c.names()))
			}
			c.Contexts = slices.Delete(c.Contexts, i, i+1)
			if c.CurrentContext == args[0] {
				c.CurrentContext = ""
			}
			if err := saveConfig(path, c); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted context %q from %s.\n", args[0], path)
			return nil
		},
	}
	cmd.ValidArgsFunction = completeContexts
	return cmd
}

func readConfig() (string, *meshctlConfig, error) {
	path, err := configPath()
	if err != nil {
		return "", nil, err
	}
	c, err := loadConfig(path)
	return path, c, err
}

func completeContexts(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	_, c, err := readConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, n := range c.names() {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
