package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes, as kubectl uses them: 0 ok, 1 the command failed, 2 the
// command line was wrong.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks an error in the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// silentError carries an exit code for a command that has already printed
// what went wrong (check prints its table, then fails).
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// run executes meshctl with args and returns the exit code. It builds a new
// command tree each time, so tests can call it concurrently and flags read
// the environment afresh.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var silent silentError
	if errors.As(err, &silent) {
		return silent.code
	}
	name := "meshctl"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ue usageError
	var ce callErr
	if errors.As(err, &ue) || (!errors.As(err, &ce) && isCobraUsage(err)) {
		if cmd != nil && !strings.Contains(err.Error(), "hint:") {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	return exitFailure
}

// isCobraUsage recognises the command-line errors that cobra itself returns.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires ", "flag needs an argument", "bad flag syntax", "if any flags in the group"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "meshctl",
		Short: "Operate a Meshplane installation",
		Long: `meshctl operates a Meshplane installation: install the management plane,
register workload clusters, check what is connected and applied, describe
why a policy applies or was rejected, dump snapshots, and render policies
to Istio YAML offline.

Commands that call the management plane use the current meshctl context
(` + "`meshctl config`" + `: $MESHPLANE_CONFIG, else ~/.config/meshplane/config.yaml),
or the one --context names. --addr (or $MESHPLANE_ADDR) and a management
service certificate (--ca-file, --cert-file and --key-file, or --pki-dir)
override it. Commands that print objects take -o table|yaml|json.`,
		SilenceErrors:      true,
		SilenceUsage:       true,
		Args:               groupArgs,
		RunE:               groupRun,
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.HiddenDefaultCmd = false
	root.PersistentFlags().String("context", "", "the meshctl context to use (meshctl config get-contexts); default the current one [$"+contextEnv+"]")
	_ = root.RegisterFlagCompletionFunc("context", completeContexts)
	root.AddCommand(
		newAccessLogsCmd(),
		newCheckCmd(),
		newClusterCmd(),
		newConfigCmd(),
		newDescribeCmd(),
		newInstallCmd(),
		newUninstallCmd(),
		newRenderCmd(),
		newSnapshotCmd(),
		newVersionCmd(),
	)
	return root
}

// newGroupCmd is a command that only holds subcommands.
func newGroupCmd(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  groupArgs,
		RunE:  groupRun,
		// `meshctl cluster frobnicate --addr x` is an unknown command, not
		// an unknown flag.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// groupArgs and groupRun make a command that only holds subcommands print
// its usage and exit 2 when called alone or with an unknown subcommand.
func groupArgs(_ *cobra.Command, _ []string) error { return nil }

func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q", args[0])
	}
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Usage()
	return silentError{exitUsage}
}

// exactArgs is cobra.ExactArgs with a usage error (exit 2) that says what
// the argument is.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s, got %d argument(s) %q", what, len(args), args)
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument(s) %q", args)
	}
	return nil
}
