package smallstep

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"go.step.sm/crypto/x509util"
)

// intermediateTemplate is an Istio plug-in CA (see domain.IntermediateSpec):
// nothing comes from the request but its key.
const intermediateTemplate = `{
	"subject": {"organization": {{ toJson .Organization }}, "commonName": {{ toJson .CommonName }}},
	"uris": {{ toJson .URIs }},
	"keyUsage": ["certSign", "crlSign", "digitalSignature"],
	"basicConstraints": {"isCA": true, "maxPathLen": 0}
}`

// rootTemplate is a VirtualMesh root: it signs only intermediates, which
// sign only leaves.
const rootTemplate = `{
	"subject": {"organization": ["Meshplane"], "commonName": {{ toJson .CommonName }}},
	"keyUsage": ["certSign", "crlSign"],
	"basicConstraints": {"isCA": true, "maxPathLen": 1}
}`

// VirtualMeshCA makes VirtualMesh roots and signs Istio intermediates with
// them, with go.step.sm/crypto's x509util templates. It holds no key: every
// call is given its root.
type VirtualMeshCA struct{}

var _ app.IntermediateCA = VirtualMeshCA{}

// NewRoot makes a self-signed root for vm, with its key algorithm (ECDSA
// P-256 or RSA 4096) and lifetime.
func (VirtualMeshCA) NewRoot(vm domain.VirtualMesh, now time.Time) (domain.RootCA, error) {
	var key crypto.Signer
	var err error
	switch vm.Root.KeyAlgorithm {
	case domain.KeyRSA4096:
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("generate %s root key: %w", vm.Root.KeyAlgorithm, err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("root request: %w", err)
	}
	req, err := x509.ParseCertificateRequest(csr)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("root request: %w", err)
	}
	data := x509util.TemplateData{"CommonName": vm.Ref.String() + " VirtualMesh root CA"}
	tmpl, err := x509util.NewCertificate(req, x509util.WithTemplate(rootTemplate, data))
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("root template: %w", err)
	}
	c := tmpl.GetCertificate()
	c.NotBefore, c.NotAfter = now.Add(-Backdate), now.Add(vm.RootTTL())
	cert, err := x509util.CreateCertificate(c, c, key.Public(), key)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("sign root: %w", err)
	}
	return domain.RootCA{Cert: cert, Key: key}, nil
}

// SignIntermediate signs csr's key as an intermediate under root.
func (VirtualMeshCA) SignIntermediate(root domain.RootCA, csr *x509.CertificateRequest, spec domain.IntermediateSpec) (*x509.Certificate, error) {
	if root.Cert == nil || root.Key == nil {
		return nil, errors.New("no root to sign with")
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("CSR signature: %w", err)
	}
	data := x509util.TemplateData{
		"Organization": []string{spec.Organization},
		"CommonName":   spec.CommonName,
		"URIs":         []string{spec.URI.String()},
	}
	tmpl, err := x509util.NewCertificate(csr, x509util.WithTemplate(intermediateTemplate, data))
	if err != nil {
		return nil, fmt.Errorf("intermediate template: %w", err)
	}
	c := tmpl.GetCertificate()
	c.NotBefore, c.NotAfter = spec.NotBefore, spec.NotAfter
	cert, err := x509util.CreateCertificate(c, root.Cert, csr.PublicKey, root.Key)
	if err != nil {
		return nil, fmt.Errorf("sign intermediate %s: %w", spec.CommonName, err)
	}
	return cert, nil
}
