package memory_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/app"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTokensLoadFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		// valid maps clusters to a token that must match.
		valid map[string]string
		// invalid maps clusters to a token that must not match.
		invalid map[string]string
		// unknown clusters must have no token at all.
		unknown []string
		// wantErr is a substring of the error; empty means success.
		wantErr string
	}{
		{
			name:    "plain tokens",
			content: "east east-token\nwest   west-token\n",
			valid:   map[string]string{"east": "east-token", "west": "west-token"},
			invalid: map[string]string{"east": "west-token", "west": "east-token"},
			unknown: []string{"north"},
		},
		{
			name:    "sha256 hashes, lower and upper case hex",
			content: "east sha256:" + sha256Hex("east-token") + "\nwest sha256:" + strings.ToUpper(sha256Hex("west-token")) + "\n",
			valid:   map[string]string{"east": "east-token", "west": "west-token"},
			// The stored form is a hash: presenting the hash itself must
			// not work.
			invalid: map[string]string{"east": "sha256:" + sha256Hex("east-token")},
		},
		{
			name:    "comments, blank lines, indentation and CRLF",
			content: "# bootstrap tokens\n\n   \r\n  east east-token  \r\n\t# west west-token\n",
			valid:   map[string]string{"east": "east-token"},
			unknown: []string{"west"},
		},
		{
			name:    "no trailing newline",
			content: "east east-token",
			valid:   map[string]string{"east": "east-token"},
		},
		{
			name:    "empty file",
			content: "",
			unknown: []string{"east"},
		},
		{name: "one field", content: "east east-token\nwest\n", wantErr: "line 2"},
		{name: "three fields", content: "\n\neast east-token extra\n", wantErr: "line 3"},
		{name: "token that is not ASCII", content: "east east-token\nwest wést\n", wantErr: "line 2: the token must be printable ASCII"},
		{name: "invalid cluster name", content: "# c\nEast east-token\n", wantErr: "line 2"},
		{name: "cluster name with a dash at the end", content: "east- east-token\n", wantErr: "line 1"},
		{name: "short hash", content: "east sha256:abcd\n", wantErr: "line 1: bad sha256 hash"},
		{name: "hash that is not hex", content: "east sha256:" + strings.Repeat("zz", 32) + "\n", wantErr: "line 1: bad sha256 hash"},
		{name: "empty hash", content: "east ok\nwest sha256:\n", wantErr: "line 2: bad sha256 hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			tokens := memory.NewTokens()
			err := tokens.LoadFile(path)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("LoadFile succeeded, want an error containing %q", tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("LoadFile error %q, want it to name %s and contain %q", err, path, tc.wantErr)
				}
				// A bad file loads nothing, not the lines before the bad one.
				if _, err := tokens.TokenHash(t.Context(), "east"); !errors.Is(err, app.ErrUnknownToken) {
					t.Fatalf("after a failed load, east has a token (err %v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadFile: %v", err)
			}
			for cluster, tok := range tc.valid {
				h, err := tokens.TokenHash(t.Context(), cluster)
				if err != nil {
					t.Fatalf("TokenHash(%s): %v", cluster, err)
				}
				if !h.Matches(tok) {
					t.Errorf("token %q does not match cluster %s", tok, cluster)
				}
			}
			for cluster, tok := range tc.invalid {
				h, err := tokens.TokenHash(t.Context(), cluster)
				if err != nil {
					t.Fatalf("TokenHash(%s): %v", cluster, err)
				}
				if h.Matches(tok) {
					t.Errorf("token %q matches cluster %s, want no match", tok, cluster)
				}
			}
			for _, cluster := range tc.unknown {
				if _, err := tokens.TokenHash(t.Context(), cluster); !errors.Is(err, app.ErrUnknownToken) {
					t.Errorf("TokenHash(%s) err = %v, want ErrUnknownToken", cluster, err)
				}
			}
		})
	}
}

func TestTokensLoadFileMissing(t *testing.T) {
	err := memory.NewTokens().LoadFile(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadFile of a missing file: %v, want os.ErrNotExist", err)
	}
}

// A line longer than the scanner's buffer is an error that says where,
// not a silent truncation of the file.
func TestTokensLoadLongLine(t *testing.T) {
	content := "east east-token\nwest " + strings.Repeat("x", 128<<10) + "\n"
	err := memory.NewTokens().Load(strings.NewReader(content), "tokens.txt")
	if err == nil || !strings.Contains(err.Error(), "tokens.txt line 2") {
		t.Fatalf("Load of an over-long line: %v, want an error naming tokens.txt line 2", err)
	}
}

func TestTokensSet(t *testing.T) {
	tokens := memory.NewTokens()
	tokens.Set("east", "one")
	tokens.Set("east", "two")
	h, err := tokens.TokenHash(t.Context(), "east")
	if err != nil {
		t.Fatal(err)
	}
	if h.Matches("one") || !h.Matches("two") {
		t.Fatal("Set did not replace the earlier token")
	}
}

// FuzzLoadTokens checks that no input panics the parser, that errors name
// a line, and that every cluster loaded from a successful parse has a
// token hash.
func FuzzLoadTokens(f *testing.F) {
	for _, seed := range []string{
		"",
		"east east-token\n",
		"east sha256:" + sha256Hex("x") + "\n",
		"# comment\n\n  west  w\r\n",
		"east\n",
		"east a b\n",
		"East token\n",
		"east sha256:zz\n",
		"east sha256:\n",
		"-east token\n",
		"a-b-c sha256:" + strings.Repeat("0", 64),
		"\x00 \xff\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content string) {
		tokens := memory.NewTokens()
		err := tokens.Load(strings.NewReader(content), "fuzz")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz line ") {
				t.Fatalf("error %q names no line", err)
			}
			return
		}
		for line := range strings.Lines(content) {
			fields := strings.Fields(line)
			if len(fields) == 2 && !strings.HasPrefix(fields[0], "#") {
				if _, err := tokens.TokenHash(t.Context(), fields[0]); err != nil {
					t.Fatalf("cluster %q from line %q has no token: %v", fields[0], line, err)
				}
			}
		}
	})
}
