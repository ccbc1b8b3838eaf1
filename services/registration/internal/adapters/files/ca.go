package files

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/app"
)

// CADir is the CA kept in a directory (root.crt, intermediate.crt,
// intermediate.key): a development CA is made there when it holds none.
type CADir struct {
	dir, name string
}

var _ app.CASource = CADir{}

// NewCADir loads the CA in dir; a development CA made there is called
// name.
func NewCADir(dir, name string) CADir { return CADir{dir: dir, name: name} }

// LoadCA implements app.CASource.
func (c CADir) LoadCA(context.Context) (*pki.CA, bool, error) {
	return pki.LoadOrCreateCA(c.dir, c.name)
}

// String implements app.CASource.
func (c CADir) String() string { return "directory " + c.dir }

// OwnIntermediate is the operator's intermediate, with its key, and the
// root that signed it, each in a PEM file.
type OwnIntermediate struct {
	rootCert, intermediateCert, intermediateKey string
}

var _ app.CASource = OwnIntermediate{}

// NewOwnIntermediate loads the intermediate from the files named.
func NewOwnIntermediate(rootCert, intermediateCert, intermediateKey string) OwnIntermediate {
	return OwnIntermediate{rootCert: rootCert, intermediateCert: intermediateCert, intermediateKey: intermediateKey}
}

// LoadCA implements app.CASource; it never creates a CA.
func (o OwnIntermediate) LoadCA(context.Context) (*pki.CA, bool, error) {
	ca, err := pki.LoadCAFiles(o.rootCert, o.intermediateCert, o.intermediateKey)
	return ca, false, err
}

// String implements app.CASource.
func (o OwnIntermediate) String() string { return "intermediate file " + o.intermediateCert }

// OwnRoot is the operator's root and its key, each in a PEM file: a new
// intermediate is made from it at every load.
type OwnRoot struct {
	rootCert, rootKey, name string
	ttl                     time.Duration
}

var _ app.CASource = OwnRoot{}

// NewOwnRoot makes intermediates called name, valid for ttl (capped by
// the root), from the root and key in the files named.
func NewOwnRoot(rootCert, rootKey, name string, ttl time.Duration) OwnRoot {
	return OwnRoot{rootCert: rootCert, rootKey: rootKey, name: name, ttl: ttl}
}

// LoadCA implements app.CASource: the intermediate is new, but the root is
// the operator's, so created is false.
func (o OwnRoot) LoadCA(context.Context) (*pki.CA, bool, error) {
	root, key, err := o.read()
	if err != nil {
		return nil, false, err
	}
	ca, err := pki.NewIntermediateCA(root, key, o.name, o.ttl)
	return ca, false, err
}

func (o OwnRoot) read() (*x509.Certificate, crypto.Signer, error) {
	rootPEM, err := os.ReadFile(o.rootCert)
	if err != nil {
		return nil, nil, fmt.Errorf("read CA root: %w", err)
	}
	roots, err := pki.ParseCertificates(rootPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA root %s: %w", o.rootCert, err)
	}
	keyPEM, err := os.ReadFile(o.rootKey)
	if err != nil {
		return nil, nil, fmt.Errorf("read CA root key: %w", err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("CA root key %s: %w", o.rootKey, err)
	}
	return roots[0], key, nil
}

// String implements app.CASource.
func (o OwnRoot) String() string { return "root file " + o.rootCert }
