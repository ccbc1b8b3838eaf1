package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/test/e2e/harness"
)

// docBlock is one ```sh block of a walkthrough, with the doctest comments
// right above its fence.
type docBlock struct {
	line   int // of the opening fence
	code   string
	skip   string // the reason, when the block is not run
	demo   bool   // the block that starts the demo: the test starts it
	istiod bool   // runs only when the demo runs istiod
	expect []string
}

// parseDocBlocks reads the ```sh blocks of a Markdown file. A block is
// run unless a `<!-- doctest: skip (reason) -->` comment precedes it;
// `<!-- doctest: demo -->` marks the block the harness stands in for;
// `<!-- doctest: istiod -->` a block that needs the demo's istiod (run
// unless MESHPLANE_SKIP_ISTIO_TESTS=1);
// `<!-- doctest: expect TEXT -->` asks that the block's output contain TEXT.
// Other fences (```text, ```yaml) are output or examples, and not run.
func parseDocBlocks(path string) ([]docBlock, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		blocks  []docBlock
		pending docBlock
		cur     *docBlock
		inOther bool
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil:
			if strings.TrimSpace(line) == "```" {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.code += line + "\n"
		case inOther:
			if strings.TrimSpace(line) == "```" {
				inOther = false
			}
		case line == "```sh":
			blk := pending
			blk.line = n
			cur = &blk
			pending = docBlock{}
		case strings.HasPrefix(line, "```"):
			inOther = true
			pending = docBlock{}
		case strings.HasPrefix(line, "<!-- doctest:") && strings.HasSuffix(line, "-->"):
			d := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "<!-- doctest:"), "-->"))
			switch {
			case d == "demo":
				pending.demo = true
			case d == "istiod":
				pending.istiod = true
			case strings.HasPrefix(d, "skip "):
				pending.skip = strings.TrimPrefix(d, "skip ")
			case strings.HasPrefix(d, "expect "):
				pending.expect = append(pending.expect, strings.TrimPrefix(d, "expect "))
			default:
				return nil, fmt.Errorf("%s:%d: unknown doctest comment %q (want demo, istiod, skip (reason) or expect TEXT)", path, n, d)
			}
		case strings.TrimSpace(line) != "":
			// A doctest comment belongs to the fence right below it.
			if pending.demo || pending.istiod || pending.skip != "" || len(pending.expect) > 0 {
				return nil, fmt.Errorf("%s:%d: a doctest comment is not directly above a ```sh fence", path, n-1)
			}
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: unterminated ```sh block", path, cur.line)
	}
	return blocks, sc.Err()
}

// TestGettingStarted runs docs/getting-started.md: the demo stands in for
// its `make demo` block (built from test/e2e/cmd/demo, with this run's
// binaries, its state in a temporary directory's .demo as `make demo`
// writes it in a checkout, and istiod on, unless MESHPLANE_SKIP_ISTIO_TESTS=1
// skips the blocks that need it), and every other ```sh block runs, in
// order, in one bash in that directory, as a user types them in a second
// terminal. Each block must succeed and print what its expect comments
// say.
func TestGettingStarted(t *testing.T) {
	harness.RequireE2E(t)
	doc := filepath.Join(harness.RepoRoot(), "docs", "getting-started.md")
	blocks, err := parseDocBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	var run []docBlock
	demos := 0
	istiod := os.Getenv(istiotest.EnvSkip) != "1"
	for _, b := range blocks {
		switch {
		case b.istiod && !istiod:
			t.Logf("%s:%d: not run: it needs the demo's istiod, and %s=1", doc, b.line, istiotest.EnvSkip)
		case b.demo:
			demos++
			if strings.TrimSpace(b.code) != "make demo" {
				t.Fatalf("%s:%d: the demo block is %q; the test stands in for exactly `make demo`", doc, b.line, b.code)
			}
		case b.skip != "":
			t.Logf("%s:%d: not run: %s", doc, b.line, b.skip)
		default:
			run = append(run, b)
		}
	}
	if demos != 1 || len(run) == 0 {
		t.Fatalf("%s: %d demo blocks and %d blocks to run; want one demo block and some to run", doc, demos, len(run))
	}

	istiodFlag := "off"
	if istiod {
		istiodFlag = "on"
	}
	ctx := t.Context()
	work := t.TempDir()
	demoBin := filepath.Join(work, "demo-bin")
	if err := harness.Build(ctx, demoBin, "./test/e2e/cmd/demo"); err != nil {
		t.Fatal(err)
	}
	demo, err := harness.Start(harness.Spec{
		Name: "demo", Binary: harness.Binary(demoBin, "demo"),
		Args:   []string{"--bin", binDir, "--dir", filepath.Join(work, ".demo"), "--istiod=" + istiodFlag},
		LogDir: filepath.Join(work, "logs"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(demo.Stop)
	envFile := filepath.Join(work, ".demo", "env")
	err = harness.Wait(ctx, 4*time.Minute, "the demo to be ready (.demo/env)", func(context.Context) (bool, error) {
		_, err := os.Stat(envFile)
		return err == nil, nil
	}, demo)
	if err != nil {
		t.Fatal(err)
	}

	// One script, one shell: what a block exports stays for the next. A
	// marker line before each block splits the output.
	const marker = "@@doctest-block@@"
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, b := range run {
		fmt.Fprintf(&script, "echo '%s %d'\n%s", marker, i, b.code)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(sctx, "bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = userEnv(work)
	out, err := cmd.CombinedOutput()
	parts := strings.Split(string(out), marker+" ")
	outputs := make([]string, len(run))
	for _, p := range parts[1:] {
		var i int
		if _, serr := fmt.Sscanf(p, "%d", &i); serr == nil && i < len(outputs) {
			outputs[i] = p
		}
	}
	if err != nil {
		last := len(parts) - 2 // the block that was running
		where := "before the first block"
		if last >= 0 && last < len(run) {
			where = fmt.Sprintf("the block at %s:%d:\n%s", doc, run[last].line, run[last].code)
		}
		t.Fatalf("the walkthrough failed (%v) in %s\noutput:\n%s\ndemo log:\n%s", err, where, out, demo.LogTail(3000))
	}
	for i, b := range run {
		for _, want := range b.expect {
			if !strings.Contains(outputs[i], want) {
				t.Errorf("%s:%d: the output lacks %q:\n%s", doc, b.line, want, outputs[i])
			}
		}
	}
}

// userEnv is this process's environment without anything that points
// meshctl or kubectl somewhere, and with HOME in dir: the walkthrough must
// set up everything it uses itself.
func userEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MESHPLANE_") && k != "MESHPLANE_TOOLS_CACHE" || k == "KUBECONFIG" || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+dir)
}

// TestParseDocBlocks: which blocks run, what they expect, and the comment
// mistakes that fail instead of silently running or skipping a block.
func TestParseDocBlocks(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "doc.md")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	blocks, err := parseDocBlocks(write("intro\n<!-- doctest: skip (installs) -->\n```sh\napt-get install x\n```\n\n```text\nnot run\n```\n<!-- doctest: demo -->\n```sh\nmake demo\n```\n<!-- doctest: expect a b -->\n<!-- doctest: expect c -->\n```sh\necho a b c\necho d\n```\n<!-- doctest: istiod -->\n```sh\nroute\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 || blocks[0].skip != "(installs)" || !blocks[1].demo || blocks[2].code != "echo a b c\necho d\n" ||
		strings.Join(blocks[2].expect, "|") != "a b|c" || blocks[2].line != 16 || blocks[2].istiod || !blocks[3].istiod {
		t.Fatalf("blocks = %+v", blocks)
	}
	for body, want := range map[string]string{
		"<!-- doctest: expct x -->\n```sh\necho\n```\n":        "unknown doctest comment",
		"<!-- doctest: expect x -->\ntext\n```sh\necho\n```\n": "not directly above",
		"```sh\necho\n": "unterminated",
	} {
		if _, err := parseDocBlocks(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parse %q: %v, want an error with %q", body, err, want)
		}
	}
}
