package main

import "github.com/spf13/cobra"

func newDescribeCmd() *cobra.Command { return &cobra.Command{Use: "describe", Hidden: true} }
