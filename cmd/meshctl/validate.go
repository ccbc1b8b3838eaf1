package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/render"
)

// validatorName is the command that runs Istio's own validation on
// rendered objects. It is built from tools/istiovalidate, a module outside
// the workspace, so that meshctl does not take on istio.io/istio.
const validatorName = "meshplane-istio-validate"

// findValidator returns the path of the validator: path when given
// (--validator), else the one beside meshctl's own executable, else the
// one on PATH.
func findValidator(path string) (string, error) {
	if path != "" {
		if !isExecutableFile(path) {
			return "", usagef("--validator %s: not an executable file", path)
		}
		return path, nil
	}
	var beside string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			beside = filepath.Join(filepath.Dir(exe), validatorName)
			if isExecutableFile(beside) {
				return beside, nil
			}
		}
	}
	if p, err := exec.LookPath(validatorName); err == nil {
		return p, nil
	}
	return "", usagef("--validate needs %s, which is neither beside meshctl (%s) nor on PATH\n"+
		"hint: build it with `make istio-validate` (it goes into bin/, beside meshctl), or give its path with --validator PATH", validatorName, beside)
}

func isExecutableFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// validateRendered runs the validator on the objects of clusters, as one
// stream of manifests on its standard input, and prints what it says on w.
// It returns silentError{exitFailure} when Istio rejects an object.
func validateRendered(ctx context.Context, validator string, w io.Writer, outputs map[string]*snapshotv1.OutputSnapshot, clusters []string) error {
	var in bytes.Buffer
	for _, c := range clusters {
		for _, m := range render.Manifests(outputs[c]) {
			b, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("encode %s %s: %w", m.Kind, m.Metadata.Name, err)
			}
			in.WriteString("---\n")
			in.Write(b)
			in.WriteString("\n")
		}
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, validator)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == exitFailure:
	default:
		return fmt.Errorf("%s: %v\n%s", validator, err, bytes.TrimSpace(errOut.Bytes()))
	}
	// The findings, one a line, then the validator's summary.
	_, _ = w.Write(out.Bytes())
	_, _ = w.Write(errOut.Bytes())
	if err != nil {
		return silentError{exitFailure}
	}
	return nil
}
