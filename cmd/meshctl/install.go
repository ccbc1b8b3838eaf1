package main

import "github.com/spf13/cobra"

func newInstallCmd() *cobra.Command { return &cobra.Command{Use: "install", Hidden: true} }
