package tilt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// Tilt cannot run here (DEPENDENCIES.md), so the Tiltfile runs under
// go.starlark.net with stubs of the Tilt builtins it calls. Each stub records
// its call; the checks in tiltfile_test.go read the record. A builtin that
// the Tiltfile calls and that has no stub fails the run with "undefined",
// so a new call cannot slip by unchecked.

// call is one recorded call of a Tilt builtin.
type call struct {
	fn     string
	args   starlark.Tuple
	kwargs map[string]starlark.Value
	pos    string // where the Tiltfile made the call
}

// arg returns the positional argument i, or the keyword name.
func (c call) arg(i int, name string) starlark.Value {
	if v, ok := c.kwargs[name]; ok {
		return v
	}
	if i >= 0 && i < len(c.args) {
		return c.args[i]
	}
	return nil
}

// str returns an argument as a Go string ("" when absent or not a string).
func (c call) str(i int, name string) string {
	if s, ok := c.arg(i, name).(starlark.String); ok {
		return string(s)
	}
	return ""
}

// strs returns an argument that may be a string or a list of strings.
func (c call) strs(i int, name string) []string { return strList(c.arg(i, name)) }

func strList(v starlark.Value) []string {
	switch v := v.(type) {
	case starlark.String:
		return []string{string(v)}
	case *starlark.List:
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, strList(v.Index(i))...)
		}
		return out
	case starlark.Tuple:
		var out []string
		for _, e := range v {
			out = append(out, strList(e)...)
		}
		return out
	}
	return nil
}

// blob stands in for Tilt's Blob: the output of local(), helm() or
// read_file(). from says which call made it.
type blob struct {
	from string
	text string
}

func (b *blob) String() string        { return b.text }
func (b *blob) Type() string          { return "blob" }
func (b *blob) Freeze()               {}
func (b *blob) Truth() starlark.Bool  { return b.text != "" }
func (b *blob) Hash() (uint32, error) { return starlark.String(b.text).Hash() }

// liveUpdateStep is what sync() and run() return.
type liveUpdateStep struct {
	kind string
	args []string
}

func (s *liveUpdateStep) String() string        { return s.kind + "(" + strings.Join(s.args, ", ") + ")" }
func (s *liveUpdateStep) Type() string          { return "live_update_step" }
func (s *liveUpdateStep) Freeze()               {}
func (s *liveUpdateStep) Truth() starlark.Bool  { return true }
func (s *liveUpdateStep) Hash() (uint32, error) { return starlark.String(s.String()).Hash() }

// recorder runs a Tiltfile and keeps what it called.
type recorder struct {
	root       string            // repository root: Tilt resolves paths against the Tiltfile's directory
	flags      map[string]any    // what `tilt up -- --flag=...` would pass to config.parse
	k8sContext string            // what k8s_context() returns
	defined    map[string]string // config settings: name -> define_* kind
	calls      []call
	prints     []string
}

func newRecorder(root string) *recorder {
	return &recorder{root: root, flags: map[string]any{}, k8sContext: "kind-meshplane-mgmt", defined: map[string]string{}}
}

// callsOf returns the recorded calls of one builtin, in order.
func (r *recorder) callsOf(fn string) []call {
	var out []call
	for _, c := range r.calls {
		if c.fn == fn {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) record(thread *starlark.Thread, fn string, args starlark.Tuple, kwargs []starlark.Tuple) call {
	c := call{fn: fn, args: args, kwargs: map[string]starlark.Value{}}
	for _, kv := range kwargs {
		c.kwargs[string(kv[0].(starlark.String))] = kv[1]
	}
	if thread.CallStackDepth() > 1 {
		c.pos = thread.CallFrame(1).Pos.String()
	}
	r.calls = append(r.calls, c)
	return c
}

// builtin makes a recording builtin that returns ret(call).
func (r *recorder) builtin(name string, ret func(c call) (starlark.Value, error)) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		c := r.record(thread, name, args, kwargs)
		if ret == nil {
			return starlark.None, nil
		}
		return ret(c)
	})
}

func (r *recorder) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.root, p)
}

// predeclared are the Tilt builtins the stubs cover.
func (r *recorder) predeclared() starlark.StringDict {
	none := func(call) (starlark.Value, error) { return starlark.None, nil }
	define := func(kind string) func(call) (starlark.Value, error) {
		return func(c call) (starlark.Value, error) {
			r.defined[c.str(0, "name")] = kind
			return starlark.None, nil
		}
	}
	config := &starlarkstruct.Module{Name: "config", Members: starlark.StringDict{
		"define_string":      r.builtin("config.define_string", define("string")),
		"define_string_list": r.builtin("config.define_string_list", define("string_list")),
		"define_bool":        r.builtin("config.define_bool", define("bool")),
		"parse": r.builtin("config.parse", func(call) (starlark.Value, error) {
			d := starlark.NewDict(len(r.flags))
			keys := make([]string, 0, len(r.flags))
			for k := range r.flags {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if _, ok := r.defined[k]; !ok {
					return nil, fmt.Errorf("config.parse: flag --%s is not defined by the Tiltfile", k)
				}
				var v starlark.Value
				switch x := r.flags[k].(type) {
				case string:
					v = starlark.String(x)
				case bool:
					v = starlark.Bool(x)
				case []string:
					l := make([]starlark.Value, len(x))
					for i, s := range x {
						l[i] = starlark.String(s)
					}
					v = starlark.NewList(l)
				default:
					return nil, fmt.Errorf("config.parse: flag %s: unsupported %T", k, x)
				}
				_ = d.SetKey(starlark.String(k), v)
			}
			return d, nil
		}),
	}}
	osPath := &starlarkstruct.Module{Name: "os.path", Members: starlark.StringDict{
		"join": starlark.NewBuiltin("os.path.join", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return starlark.String(filepath.Join(strList(args)...)), nil
		}),
		"exists": starlark.NewBuiltin("os.path.exists", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			_, err := os.Stat(r.abs(strList(args)[0]))
			return starlark.Bool(err == nil), nil
		}),
		"dirname": starlark.NewBuiltin("os.path.dirname", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return starlark.String(filepath.Dir(strList(args)[0])), nil
		}),
		"basename": starlark.NewBuiltin("os.path.basename", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return starlark.String(filepath.Base(strList(args)[0])), nil
		}),
	}}
	osMod := &starlarkstruct.Module{Name: "os", Members: starlark.StringDict{
		"path": osPath,
		"getcwd": starlark.NewBuiltin("os.getcwd", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.String(r.root), nil
		}),
		"getenv": starlark.NewBuiltin("os.getenv", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 1 {
				return args[1], nil
			}
			return starlark.None, nil
		}),
	}}
	return starlark.StringDict{
		"config":              config,
		"os":                  osMod,
		"TRIGGER_MODE_AUTO":   starlark.String("TRIGGER_MODE_AUTO"),
		"TRIGGER_MODE_MANUAL": starlark.String("TRIGGER_MODE_MANUAL"),
		"allow_k8s_contexts":  r.builtin("allow_k8s_contexts", none),
		"k8s_context": r.builtin("k8s_context", func(call) (starlark.Value, error) {
			return starlark.String(r.k8sContext), nil
		}),
		"update_settings": r.builtin("update_settings", none),
		"fail": starlark.NewBuiltin("fail", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return nil, fmt.Errorf("Tiltfile called fail(%s)", strings.Join(strList(args), " "))
		}),
		"local": r.builtin("local", func(c call) (starlark.Value, error) {
			cmd := c.str(0, "command")
			if strings.HasPrefix(cmd, "git describe") {
				return &blob{from: "local", text: "v0.0.0-test\n"}, nil
			}
			return &blob{from: "local: " + cmd, text: "# output of " + cmd + "\n"}, nil
		}),
		"read_file": r.builtin("read_file", func(c call) (starlark.Value, error) {
			b, err := os.ReadFile(r.abs(c.str(0, "file_path")))
			if err != nil {
				return nil, fmt.Errorf("read_file: %w", err)
			}
			return &blob{from: "read_file", text: string(b)}, nil
		}),
		"helm": r.builtin("helm", func(c call) (starlark.Value, error) {
			return &blob{from: "helm: " + c.str(0, "paths"), text: "# helm template " + c.str(0, "paths") + "\n"}, nil
		}),
		"k8s_yaml":       r.builtin("k8s_yaml", none),
		"k8s_resource":   r.builtin("k8s_resource", none),
		"local_resource": r.builtin("local_resource", none),
		"docker_build":   r.builtin("docker_build", none),
		"sync": r.builtin("sync", func(c call) (starlark.Value, error) {
			return &liveUpdateStep{kind: "sync", args: []string{c.str(0, "local_path"), c.str(1, "remote_path")}}, nil
		}),
		"run": r.builtin("run", func(c call) (starlark.Value, error) {
			return &liveUpdateStep{kind: "run", args: []string{c.str(0, "cmd")}}, nil
		}),
		"restart_container": r.builtin("restart_container", func(call) (starlark.Value, error) {
			return &liveUpdateStep{kind: "restart_container"}, nil
		}),
		"port_forward": r.builtin("port_forward", func(c call) (starlark.Value, error) {
			return starlark.String(fmt.Sprintf("%v:%v", c.arg(0, "local_port"), c.arg(1, "container_port"))), nil
		}),
		"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
	}
}

// extensions are the Tilt extensions (load('ext://NAME', ...)) the stubs
// cover. docker_build_with_restart is recorded as a docker_build whose
// live_update restarts the process (what the extension does).
func (r *recorder) extensions() map[string]starlark.StringDict {
	return map[string]starlark.StringDict{
		"ext://restart_process": {
			"docker_build_with_restart": r.builtin("docker_build_with_restart", nil),
		},
	}
}

// run executes the Tiltfile at path (relative to the root).
func (r *recorder) run(path string, src []byte) error {
	exts := r.extensions()
	thread := &starlark.Thread{
		Name:  "Tiltfile",
		Print: func(_ *starlark.Thread, msg string) { r.prints = append(r.prints, msg) },
		Load: func(_ *starlark.Thread, module string) (starlark.StringDict, error) {
			if m, ok := exts[module]; ok {
				return m, nil
			}
			return nil, fmt.Errorf("load(%q): no stub for this module; add one to test/e2e/tilt", module)
		},
	}
	// The dialect Tilt runs: top-level if and for, sets, while, recursion.
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
	_, err := starlark.ExecFileOptions(opts, thread, path, src, r.predeclared())
	if evalErr, ok := err.(*starlark.EvalError); ok {
		return fmt.Errorf("%s", evalErr.Backtrace())
	}
	return err
}
