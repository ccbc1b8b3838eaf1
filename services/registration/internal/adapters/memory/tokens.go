// Package memory keeps bootstrap token hashes in process memory, loaded
// from a file.
package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// Tokens is an app.TokenStore in memory.
type Tokens struct {
	mu     sync.RWMutex
	hashes map[string]domain.TokenHash
}

var _ app.TokenStore = (*Tokens)(nil)

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
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return fmt.Errorf("bootstrap tokens %s line %d: want \"<cluster> <token>\"", path, n)
		}
		cluster, tok := fields[0], fields[1]
		if err := pki.ValidateName(cluster); err != nil {
			return fmt.Errorf("bootstrap tokens %s line %d: %w", path, n, err)
		}
		if hexHash, ok := strings.CutPrefix(tok, "sha256:"); ok {
			b, err := hex.DecodeString(hexHash)
			if err != nil || len(b) != len(domain.TokenHash{}) {
				return fmt.Errorf("bootstrap tokens %s line %d: bad sha256 hash", path, n)
			}
			t.SetHash(cluster, domain.TokenHash(b))
			continue
		}
		t.Set(cluster, tok)
	}
	return sc.Err()
}
