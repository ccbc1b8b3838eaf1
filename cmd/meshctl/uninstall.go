package main

import "github.com/spf13/cobra"

func newUninstallCmd() *cobra.Command { return &cobra.Command{Use: "uninstall", Hidden: true} }
