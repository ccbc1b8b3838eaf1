// Package files is registration's file-system adapter: the CA sources that
// read a directory or the operator's own PEM files, and the VirtualMesh
// roots kept in a directory, for a single registration process
// (development, the all-in-one binary). Replicas share roots through the
// Kubernetes Secret store instead.
package files

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// Roots is an app.RootStore over a directory: one file per root,
// "<key>.pem", holding the certificate and its key, readable by the owner
// only.
type Roots struct {
	dir string
}

var _ app.RootStore = (*Roots)(nil)

// NewRoots keeps roots in dir, made on first use.
func NewRoots(dir string) *Roots { return &Roots{dir: dir} }

// LoadOrCreateRoot creates the file with link(2), which fails when the name
// exists: the file appears whole or not at all, and of two processes racing
// the first one's root is kept and the other reads it back.
func (r *Roots) LoadOrCreateRoot(_ context.Context, key string, create func() (domain.RootCA, error)) (domain.RootCA, bool, error) {
	if err := pki.ValidateName(key); err != nil {
		return domain.RootCA{}, false, fmt.Errorf("root key: %w", err)
	}
	path := filepath.Join(r.dir, key+".pem")
	if root, err := readRoot(path); err == nil {
		return root, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return domain.RootCA{}, false, err
	}
	root, err := create()
	if err != nil {
		return domain.RootCA{}, false, err
	}
	data, err := encodeRoot(root)
	if err != nil {
		return domain.RootCA{}, false, err
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return domain.RootCA{}, false, fmt.Errorf("root directory: %w", err)
	}
	tmp, err := os.CreateTemp(r.dir, "."+key+".tmp*")
	if err != nil {
		return domain.RootCA{}, false, fmt.Errorf("write root: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return domain.RootCA{}, false, fmt.Errorf("write root: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return domain.RootCA{}, false, fmt.Errorf("write root: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return domain.RootCA{}, false, fmt.Errorf("write root: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return domain.RootCA{}, false, fmt.Errorf("write root: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			// Another process won the race: its root is the one.
			root, err := readRoot(path)
			return root, false, err
		}
		return domain.RootCA{}, false, fmt.Errorf("write root: %w", err)
	}
	return root, true, nil
}

func encodeRoot(root domain.RootCA) ([]byte, error) {
	if root.Cert == nil || root.Key == nil {
		return nil, errors.New("store root: certificate or key missing")
	}
	keyPEM, err := pki.EncodeKey(root.Key)
	if err != nil {
		return nil, fmt.Errorf("store root: %w", err)
	}
	return append(pki.EncodeCertificates(root.Cert), keyPEM...), nil
}

// readRoot reads a file written by encodeRoot: a CERTIFICATE block and a
// key block.
func readRoot(path string) (domain.RootCA, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return domain.RootCA{}, err
	}
	certs, err := pki.ParseCertificates(data)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("root %s: %w", path, err)
	}
	var keyPEM []byte
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			keyPEM = pem.EncodeToMemory(b)
			break
		}
	}
	if keyPEM == nil {
		return domain.RootCA{}, fmt.Errorf("root %s: no private key", path)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("root %s: %w", path, err)
	}
	return domain.RootCA{Cert: certs[0], Key: key}, nil
}
