package platform

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// EnvPrefix starts the name of every environment variable that can stand in
// for a flag: flag "ingest-addr" is read from MESHPLANE_INGEST_ADDR.
const EnvPrefix = "MESHPLANE"

// flagName joins a caller's prefix and a flag's own name, so that one binary
// can hold several option sets ("ingest-addr", "distribution-addr").
func flagName(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "-" + name
}

// EnvName returns the environment variable read for the flag name built from
// prefix and name: MESHPLANE_<PREFIX>_<NAME>, upper case, dashes as
// underscores.
func EnvName(prefix, name string) string {
	full := flagName(prefix, name)
	return EnvPrefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(full))
}

// envBinder registers flags on a FlagSet and seeds each from its environment
// variable. The environment is read at registration, so precedence is
// command line > environment > built-in default without any post-Parse step
// that callers could forget.
type envBinder struct {
	fs     *flag.FlagSet
	prefix string
	// errs collects environment values that did not parse; they are reported
	// by Validate because AddFlags has no error to return.
	errs *[]error
}

// bind wraps a flag that register has just defined under the full name, and
// applies its environment variable.
func (b envBinder) bind(name, usage string, register func(fullName, usage string)) {
	full := flagName(b.prefix, name)
	env := EnvName(b.prefix, name)
	register(full, fmt.Sprintf("%s [$%s]", usage, env))
	v, ok := os.LookupEnv(env)
	if !ok {
		return
	}
	// DefValue stays the built-in default so that -help documents the real
	// default rather than whatever this shell happens to export.
	if err := b.fs.Lookup(full).Value.Set(v); err != nil {
		*b.errs = append(*b.errs, fmt.Errorf("environment variable %s=%q: %w", env, v, err))
	}
}

// flagRef names a flag in a Validate message the way the operator typed it.
func flagRef(prefix, name string) string {
	return "--" + flagName(prefix, name)
}

// Flags registers flags whose values may also come from the environment,
// the same way the option sets of this package do, for services' own
// settings.
type Flags struct {
	b    envBinder
	errs []error
}

// NewFlags returns a registrar for flags named "<prefix>-<name>" (or just
// "<name>" with an empty prefix) on fs.
func NewFlags(fs *flag.FlagSet, prefix string) *Flags {
	f := &Flags{}
	f.b = envBinder{fs: fs, prefix: prefix, errs: &f.errs}
	return f
}

// String registers a string flag.
func (f *Flags) String(p *string, name, usage string) {
	f.b.bind(name, usage, func(full, u string) { f.b.fs.StringVar(p, full, *p, u) })
}

// Duration registers a duration flag.
func (f *Flags) Duration(p *time.Duration, name, usage string) {
	f.b.bind(name, usage, func(full, u string) { f.b.fs.DurationVar(p, full, *p, u) })
}

// Bool registers a boolean flag.
func (f *Flags) Bool(p *bool, name, usage string) {
	f.b.bind(name, usage, func(full, u string) { f.b.fs.BoolVar(p, full, *p, u) })
}

// Int registers an integer flag.
func (f *Flags) Int(p *int, name, usage string) {
	f.b.bind(name, usage, func(full, u string) { f.b.fs.IntVar(p, full, *p, u) })
}

// Err reports environment variables whose values did not parse.
func (f *Flags) Err() error { return errors.Join(f.errs...) }
