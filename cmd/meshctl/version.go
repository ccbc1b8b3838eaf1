package main

import (
	"fmt"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client version",
		Args:  noArgs,
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		fmt.Fprintf(cmd.OutOrStdout(), "meshctl %s\n", platform.Version)
		return nil
	}
	return cmd
}
