package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// outputFlag is -o/--output with the formats a command supports.
type outputFlag struct {
	format  string
	allowed []string
}

func addOutputFlag(cmd *cobra.Command, def string, allowed ...string) *outputFlag {
	return addOutputFlagNamed(cmd, "output", def, allowed...)
}

// addOutputFlagNamed is addOutputFlag with another long name, for the one
// command (snapshot dump) whose --output predates -o.
func addOutputFlagNamed(cmd *cobra.Command, long, def string, allowed ...string) *outputFlag {
	o := &outputFlag{format: def, allowed: allowed}
	cmd.Flags().StringVarP(&o.format, long, "o", def, "output format: "+strings.Join(allowed, ", "))
	_ = cmd.RegisterFlagCompletionFunc(long, func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return allowed, cobra.ShellCompDirectiveNoFileComp
	})
	return o
}

func (o *outputFlag) validate() error {
	if !slices.Contains(o.allowed, o.format) {
		return usagef("-o must be %s, not %q", orList(o.allowed), o.format)
	}
	return nil
}

func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// printStructured writes v as indented JSON or as YAML.
func printStructured(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func protoJSON(m proto.Message) json.RawMessage {
	b, err := protojson.Marshal(m)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
