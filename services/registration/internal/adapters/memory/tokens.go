// Package memory implements registration's stores in process memory: the
// static tokens of a bootstrap tokens file, and the per-cluster tokens,
// cluster records and revocations of a single replica (Redis shares them
// between replicas).
package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// Tokens holds the static, multi-use tokens of a bootstrap tokens file:
// an app.StaticTokens in memory.
type Tokens struct {
	mu     sync.RWMutex
	hashes map[string]domain.TokenHash
}

var _ app.StaticTokens = (*Tokens)(nil)

// NewTokens returns an empty store.
func NewTokens() *Tokens { return &Tokens{hashes: map[string]domain.TokenHash{}} }

// Set registers a token for a cluster; only its hash is kept.
func (t *Tokens) Set(cluster, token string) {
	t.SetHash(cluster, domain.HashToken(token))
}

// SetHash registers a token hash for a cluster.
func (t *Tokens) SetHash(cluster string, h domain.TokenHash) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hashes[cluster] = h
}

func (t *Tokens) TokenHash(_ context.Context, cluster string) (domain.TokenHash, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h, ok := t.hashes[cluster]
	if !ok {
		return domain.TokenHash{}, app.ErrUnknownToken
	}
	return h, nil
}

// LoadFile reads "<cluster> <token>" or "<cluster> sha256:<hex>" lines.
// Blank lines and lines starting with # are ignored.
func (t *Tokens) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read bootstrap tokens: %w", err)
	}
	return t.Load(bytes.NewReader(data), path)
}

// Load reads token lines as LoadFile does; source names the input in
// errors. Nothing is stored unless every line is valid, so a bad file
// cannot leave a half-loaded set behind.
func (t *Tokens) Load(r io.Reader, source string) error {
	parsed := map[string]domain.TokenHash{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return fmt.Errorf("bootstrap tokens %s line %d: want \"<cluster> <token>\"", source, n)
		}
		cluster, tok := fields[0], fields[1]
		if err := pki.ValidateName(cluster); err != nil {
			return fmt.Errorf("bootstrap tokens %s line %d: %w", source, n, err)
		}
		if hexHash, ok := strings.CutPrefix(tok, "sha256:"); ok {
			b, err := hex.DecodeString(hexHash)
			if err != nil || len(b) != len(domain.TokenHash{}) {
				return fmt.Errorf("bootstrap tokens %s line %d: bad sha256 hash", source, n)
			}
			parsed[cluster] = domain.TokenHash(b)
			continue
		}
		// A token the Register call would refuse to read would never
		// work: say so now.
		if err := domain.ParseToken(tok); err != nil {
			return fmt.Errorf("bootstrap tokens %s line %d: the token must be printable ASCII of at most %d bytes", source, n, domain.MaxTokenLen)
		}
		parsed[cluster] = domain.HashToken(tok)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("bootstrap tokens %s line %d: %w", source, n+1, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.Copy(t.hashes, parsed)
	return nil
}
