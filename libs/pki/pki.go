// Package pki holds the certificate helpers that Meshplane's services and
// agent share: a small certificate authority, SPIFFE identities, keys and
// certificate requests, and PEM files.
//
// The CA here is deliberately minimal. services/registration wraps it with
// policy (token checks, CSR validation, revocation); this package only knows
// how to mint and sign.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Identity kinds, the first path segment of a Meshplane SPIFFE ID.
const (
	KindCluster = "cluster"
	KindService = "service"
)

// DefaultTrustDomain is used when an install does not name one.
const DefaultTrustDomain = "meshplane.local"

// ID is a Meshplane SPIFFE identity: spiffe://<trust-domain>/<kind>/<name>.
type ID struct {
	TrustDomain string
	Kind        string
	Name        string
}

// ClusterID returns the identity of a workload cluster's agent.
func ClusterID(trustDomain, cluster string) ID {
	return ID{TrustDomain: trustDomain, Kind: KindCluster, Name: cluster}
}

// ServiceID returns the identity of a management service.
func ServiceID(trustDomain, service string) ID {
	return ID{TrustDomain: trustDomain, Kind: KindService, Name: service}
}

// URL returns the identity as a URI SAN.
func (id ID) URL() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: "/" + id.Kind + "/" + id.Name}
}

func (id ID) String() string { return id.URL().String() }

// ParseID parses spiffe://<trust-domain>/<kind>/<name>, where kind is
// "cluster" or "service" and name is a DNS label. Anything else, including
// extra path segments, ports, queries, fragments or escapes, is an error: an
// ID that two parsers could read differently must not name anyone.
func ParseID(u *url.URL) (ID, error) {
	if u == nil {
		return ID{}, errors.New("no URI")
	}
	if u.Scheme != "spiffe" {
		return ID{}, fmt.Errorf("URI %q: scheme is not spiffe", u)
	}
	if u.Opaque != "" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || u.RawFragment != "" || u.RawPath != "" {
		return ID{}, fmt.Errorf("URI %q: a SPIFFE ID has only a trust domain and a path", u)
	}
	if err := ValidateTrustDomain(u.Host); err != nil {
		return ID{}, fmt.Errorf("URI %q: %w", u, err)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if !strings.HasPrefix(u.Path, "/") || len(parts) != 2 {
		return ID{}, fmt.Errorf("URI %q: path must be /cluster/<name> or /service/<name>", u)
	}
	kind, name := parts[0], parts[1]
	if kind != KindCluster && kind != KindService {
		return ID{}, fmt.Errorf("URI %q: unknown kind %q (want cluster or service)", u, kind)
	}
	if err := ValidateName(name); err != nil {
		return ID{}, fmt.Errorf("URI %q: %w", u, err)
	}
	return ID{TrustDomain: u.Host, Kind: kind, Name: name}, nil
}

// ValidateTrustDomain follows the SPIFFE spec: lower-case letters, digits,
// dots, dashes and underscores.
func ValidateTrustDomain(td string) error {
	if td == "" {
		return errors.New("trust domain is empty")
	}
	for _, r := range td {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("trust domain %q has %q; only lower-case letters, digits, '.', '-' and '_' are allowed", td, r)
		}
	}
	return nil
}

// ValidateName checks that a cluster or service name is a DNS-1123 label, so
// that it is safe in URIs, label values and Redis keys.
func ValidateName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("name %q must be 1 to 63 characters", name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(name)-1
		if !ok {
			return fmt.Errorf("name %q must be lower-case letters, digits and inner dashes", name)
		}
	}
	return nil
}

// IDFromCertificate returns the identity in a certificate's only URI SAN.
// A certificate with no URI SAN, or more than one, has no identity.
func IDFromCertificate(cert *x509.Certificate) (ID, error) {
	if len(cert.URIs) != 1 {
		return ID{}, fmt.Errorf("certificate has %d URI SANs, want exactly 1", len(cert.URIs))
	}
	return ParseID(cert.URIs[0])
}

// CA is a root and an intermediate that signs leaf certificates.
type CA struct {
	Root         *x509.Certificate
	Intermediate *x509.Certificate
	signer       crypto.Signer
}

// Lifetimes of the development CA made by NewCA.
const (
	DevRootTTL         = 10 * 365 * 24 * time.Hour
	DevIntermediateTTL = 365 * 24 * time.Hour
)

// NewCA creates a new root (ECDSA P-256, path length 1, DevRootTTL) and
// intermediate (DevIntermediateTTL) for development and tests. The root's
// key is dropped: only the intermediate signs. (go.step.sm/crypto/minica
// was used before, but it makes both certificates valid for 24 hours
// only, so a development CA kept in a directory stopped working a day
// later.)
func NewCA(name string) (*CA, error) {
	if name == "" {
		name = "Meshplane"
	}
	rootKey, err := NewKey()
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("create CA: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name + " Root CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(DevRootTTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, rootKey.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("create CA: parse root: %w", err)
	}
	return NewIntermediateCA(root, rootKey, name, DevIntermediateTTL)
}

// Signer returns the intermediate's key.
func (ca *CA) Signer() crypto.Signer { return ca.signer }

// TrustBundlePEM returns the root, PEM-encoded.
func (ca *CA) TrustBundlePEM() []byte { return EncodeCertificates(ca.Root) }

// Pool returns a pool holding the root.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Root)
	return p
}

// LeafOptions says what a signed leaf certificate may do.
type LeafOptions struct {
	ID       ID
	TTL      time.Duration
	DNSNames []string
	IPs      []net.IP
	// Server adds the server-auth EKU. Client auth is always set.
	Server bool
	// KeyEncipherment adds the key-encipherment usage, which RSA key
	// exchange needs; CA.Sign sets it for every key but ECDSA.
	KeyEncipherment bool
	// Now is the issuing time; zero means time.Now.
	Now time.Time
}

// LeafBackdate is how long before its issuing time a leaf is valid from:
// it tolerates clocks that run a little behind the CA's.
const LeafBackdate = time.Minute

// LeafTemplate is the one template of a leaf certificate, for CA.Sign and
// for registration's embedded smallstep authority: CN the ID's name and OU
// its kind, the SPIFFE ID as the only URI SAN (with opts' DNS names and
// IPs), digital signature, client auth (and server auth with opts.Server),
// no CA bit, valid from LeafBackdate before opts.Now for opts.TTL but never
// past issuer. Nothing comes from a request; the signer sets the serial.
func LeafTemplate(opts LeafOptions, issuer *x509.Certificate) (*x509.Certificate, error) {
	if opts.TTL <= 0 {
		return nil, errors.New("leaf certificate lifetime must be positive")
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	notAfter := now.Add(opts.TTL)
	if notAfter.After(issuer.NotAfter) {
		notAfter = issuer.NotAfter
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if opts.Server {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	usage := x509.KeyUsageDigitalSignature
	if opts.KeyEncipherment {
		usage |= x509.KeyUsageKeyEncipherment
	}
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: opts.ID.Name, OrganizationalUnit: []string{opts.ID.Kind}},
		NotBefore:             now.Add(-LeafBackdate),
		NotAfter:              notAfter,
		KeyUsage:              usage,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{opts.ID.URL()},
		DNSNames:              opts.DNSNames,
		IPAddresses:           opts.IPs,
	}, nil
}

// Sign signs a leaf certificate for pub with the identity and usages in
// opts (LeafTemplate). Callers validate the request first; Sign takes no
// fields from it. It returns the leaf followed by the intermediate.
func (ca *CA) Sign(pub crypto.PublicKey, opts LeafOptions) ([]*x509.Certificate, error) {
	if _, ok := pub.(*ecdsa.PublicKey); !ok {
		opts.KeyEncipherment = true
	}
	tmpl, err := LeafTemplate(opts, ca.Intermediate)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return nil, fmt.Errorf("sign: serial: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Intermediate, pub, ca.signer)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", opts.ID, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("sign %s: parse: %w", opts.ID, err)
	}
	return []*x509.Certificate{leaf, ca.Intermediate}, nil
}

// IssueKeyPair makes a new key and signs a certificate for it: for the
// management services' own certificates and for tests.
func (ca *CA) IssueKeyPair(opts LeafOptions) (certPEM, keyPEM []byte, err error) {
	key, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	chain, err := ca.Sign(key.Public(), opts)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return EncodeCertificates(chain...), keyPEM, nil
}

// File names in a CA directory.
const (
	RootCertFile         = "root.crt"
	IntermediateCertFile = "intermediate.crt"
	IntermediateKeyFile  = "intermediate.key"
)

// Save writes the root, the intermediate and its key to dir. The key file is
// readable by the owner only. The root's key is not kept.
func (ca *CA) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save CA: %w", err)
	}
	keyPEM, err := EncodeKey(ca.signer)
	if err != nil {
		return fmt.Errorf("save CA: %w", err)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{RootCertFile, EncodeCertificates(ca.Root), 0o644},
		{IntermediateCertFile, EncodeCertificates(ca.Intermediate), 0o644},
		{IntermediateKeyFile, keyPEM, 0o600},
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("save CA: %w", err)
		}
	}
	return nil
}

// LoadCA reads a CA written by Save, or supplied by the user in the same
// layout.
func LoadCA(dir string) (*CA, error) {
	return LoadCAFiles(filepath.Join(dir, RootCertFile), filepath.Join(dir, IntermediateCertFile), filepath.Join(dir, IntermediateKeyFile))
}

// LoadCAFiles reads a root, an intermediate and the intermediate's key from
// three PEM files, so that an operator can point at their own PKI's files
// wherever they are mounted. Only the first certificate of each file is
// used.
func LoadCAFiles(rootFile, intermediateFile, keyFile string) (*CA, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("load CA: %w", err)
		}
		return b, nil
	}
	rootPEM, err := read(rootFile)
	if err != nil {
		return nil, err
	}
	intPEM, err := read(intermediateFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(keyFile)
	if err != nil {
		return nil, err
	}
	roots, err := ParseCertificates(rootPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA: %s: %w", rootFile, err)
	}
	ints, err := ParseCertificates(intPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA: %s: %w", intermediateFile, err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA: %s: %w", keyFile, err)
	}
	return NewCAFromParts(roots[0], ints[0], key)
}

// NewCAFromParts checks that intermediate is a CA signed by root and that
// key is its key, and returns the CA they make.
func NewCAFromParts(root, intermediate *x509.Certificate, key crypto.Signer) (*CA, error) {
	if err := intermediate.CheckSignatureFrom(root); err != nil {
		return nil, fmt.Errorf("load CA: intermediate is not signed by the root: %w", err)
	}
	if !intermediate.IsCA {
		return nil, errors.New("load CA: the intermediate certificate is not a CA")
	}
	if !publicKeysEqual(intermediate.PublicKey, key.Public()) {
		return nil, errors.New("load CA: intermediate key does not match the intermediate certificate")
	}
	return &CA{Root: root, Intermediate: intermediate, signer: key}, nil
}

// NewIntermediateCA makes a new intermediate (ECDSA P-256, path length 0)
// signed by a root the operator supplies, so that the root's key is needed
// only at start and the signing key is Meshplane's own. The intermediate
// never outlives the root.
func NewIntermediateCA(root *x509.Certificate, rootKey crypto.Signer, name string, ttl time.Duration) (*CA, error) {
	if !publicKeysEqual(root.PublicKey, rootKey.Public()) {
		return nil, errors.New("new intermediate: root key does not match the root certificate")
	}
	if name == "" {
		name = "Meshplane"
	}
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("new intermediate: serial: %w", err)
	}
	now := time.Now()
	notAfter := now.Add(ttl)
	if notAfter.After(root.NotAfter) {
		notAfter = root.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name + " Intermediate CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root, key.Public(), rootKey)
	if err != nil {
		return nil, fmt.Errorf("new intermediate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("new intermediate: parse: %w", err)
	}
	return NewCAFromParts(root, cert, key)
}

// LoadOrCreateCA loads the CA in dir, or creates and saves a new one when dir
// holds none.
func LoadOrCreateCA(dir, name string) (ca *CA, created bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, IntermediateKeyFile)); err == nil {
		ca, err := LoadCA(dir)
		if err == nil && !time.Now().Before(ca.Intermediate.NotAfter) {
			return nil, false, fmt.Errorf("load CA: the intermediate in %s expired at %s; remove the directory to create a new development CA", dir, ca.Intermediate.NotAfter.Format(time.RFC3339))
		}
		return ca, false, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("load CA: %w", err)
	}
	ca, err = NewCA(name)
	if err != nil {
		return nil, false, err
	}
	if err := ca.Save(dir); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

// NewKey returns a new ECDSA P-256 key.
func NewKey() (crypto.Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// NewCSR returns a PEM certificate request for key carrying id as its only
// SAN.
func NewCSR(key crypto.Signer, id ID) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: id.Name},
		URIs:    []*url.URL{id.URL()},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create CSR: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseCSR parses one PEM certificate request and checks its signature.
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("CSR is not a PEM CERTIFICATE REQUEST block")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("CSR has trailing data after the PEM block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CSR: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("CSR signature: %w", err)
	}
	return csr, nil
}

// EncodeCertificates PEM-encodes certificates in order.
func EncodeCertificates(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// ParseCertificates parses every CERTIFICATE block in data; there must be at
// least one.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// EncodeKey PEM-encodes a private key as PKCS#8.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKey parses a PEM private key in PKCS#8, SEC1 (EC) or PKCS#1 (RSA) form.
func ParseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", key)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	ea, ok := a.(equaler)
	return ok && ea.Equal(b)
}

// WriteFileAtomic writes data to a temporary file and renames it over path,
// so that readers never see a half-written certificate or key.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return writeFileAtomic(path, data, mode)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
