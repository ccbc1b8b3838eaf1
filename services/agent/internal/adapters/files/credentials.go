// Package files keeps the agent's credentials in a directory, for local runs
// and for a mounted volume.
package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// File names in the credentials directory.
const (
	CertFile   = "tls.crt"
	KeyFile    = "tls.key"
	BundleFile = "ca.crt"
)

// Credentials is an app.CredentialStore in a directory.
type Credentials struct {
	Dir string
}

var _ app.CredentialStore = Credentials{}

func (c Credentials) Load(context.Context) (app.Credentials, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(c.Dir, name)) }
	cert, err := read(CertFile)
	if errors.Is(err, os.ErrNotExist) {
		return app.Credentials{}, app.ErrNoCredentials
	}
	if err != nil {
		return app.Credentials{}, err
	}
	key, err := read(KeyFile)
	if err != nil {
		return app.Credentials{}, err
	}
	bundle, err := read(BundleFile)
	if err != nil {
		return app.Credentials{}, err
	}
	certs, err := pki.ParseCertificates(cert)
	if err != nil {
		return app.Credentials{}, fmt.Errorf("%s: %w", CertFile, err)
	}
	return app.Credentials{CertPEM: cert, KeyPEM: key, BundlePEM: bundle, NotAfter: certs[0].NotAfter}, nil
}

// Save replaces each file atomically, key first. A crash between files can
// leave a new key beside the old certificate; loading them then fails the
// key-pair check and the agent registers again rather than using a pair
// that does not match.
func (c Credentials) Save(_ context.Context, cred app.Credentials) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{KeyFile, cred.KeyPEM, 0o600},
		{CertFile, cred.CertPEM, 0o644},
		{BundleFile, cred.BundlePEM, 0o644},
	} {
		if err := pki.WriteFileAtomic(filepath.Join(c.Dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("save %s: %w", f.name, err)
		}
	}
	return nil
}
