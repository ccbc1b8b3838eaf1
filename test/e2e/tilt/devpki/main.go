// Command devpki writes the development PKI of the Tilt dev loop and prints
// it as Kubernetes Secrets for the management cluster:
//
//	go run ./test/e2e/tilt/devpki -dir tilt/.pki
//
// It uses libs/pki, the code the services themselves use, so the files have
// exactly the layout and identities the services expect. It lives in the
// test/e2e module because that module already depends on every lib and is
// not shipped.
//
// Into -dir it writes (and reuses on later runs):
//
//	ca/root.crt ca/intermediate.crt ca/intermediate.key  registration's CA
//	<service>.crt <service>.key                          server certificates
//	meshctl.crt meshctl.key                              for meshctl --pki-dir
//	token-<cluster>                                      static bootstrap tokens
//
// On stdout it prints the Secrets the dev values (tilt/values) name:
// meshplane-dev-ca, meshplane-<service>-tls, meshplane-dev-ca-bundle,
// meshplane-dev-bootstrap-tokens and meshplane-dev-agent-token-<cluster>.
package main

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"sigs.k8s.io/yaml"
)

// Services are the management services that get a server certificate.
var Services = []string{"registration", "ingest", "translation", "distribution", "console"}

// Options are devpki's flags.
type Options struct {
	Dir         string
	Namespace   string
	TrustDomain string
	// ServerName is one extra DNS name in every service certificate: the name
	// agents in other clusters verify when they dial a node IP (--server-name).
	ServerName string
	// StaticClusters get a reusable bootstrap token (the agent in the
	// management cluster).
	StaticClusters []string
	// Release prefixes the service names: <Release>-<service>.
	Release string
}

func main() {
	o := Options{}
	flag.StringVar(&o.Dir, "dir", "tilt/.pki", "directory for the CA, certificates and tokens (kept between runs)")
	flag.StringVar(&o.Namespace, "namespace", "meshplane", "namespace of the management services")
	flag.StringVar(&o.TrustDomain, "trust-domain", "meshplane.local", "SPIFFE trust domain")
	flag.StringVar(&o.ServerName, "server-name", "management.meshplane.internal", "extra DNS name in every service certificate")
	flag.StringVar(&o.Release, "release", "meshplane", "release name prefix of the service charts")
	clusters := flag.String("static-clusters", "mgmt", "comma-separated clusters that get a static, reusable bootstrap token")
	flag.Parse()
	o.StaticClusters = splitList(*clusters)
	if err := Run(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "devpki: %v\n", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Run writes the PKI into o.Dir and the Secrets to w.
func Run(o Options, w io.Writer) error {
	if err := pki.ValidateTrustDomain(o.TrustDomain); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", o.Dir, err)
	}
	caDir := filepath.Join(o.Dir, "ca")
	ca, _, err := pki.LoadOrCreateCA(caDir, "Meshplane Tilt development")
	if err != nil {
		return fmt.Errorf("dev CA in %s: %w", caDir, err)
	}
	rootPEM := ca.TrustBundlePEM()

	var docs []map[string]any
	caFiles := map[string][]byte{}
	for _, f := range []string{pki.RootCertFile, pki.IntermediateCertFile, pki.IntermediateKeyFile} {
		b, err := os.ReadFile(filepath.Join(caDir, f))
		if err != nil {
			return fmt.Errorf("read dev CA: %w", err)
		}
		caFiles[f] = b
	}
	docs = append(docs, secret(o.Namespace, "meshplane-dev-ca", "Opaque", caFiles))
	docs = append(docs, secret(o.Namespace, "meshplane-dev-ca-bundle", "Opaque", map[string][]byte{"ca.crt": rootPEM}))

	for _, svc := range Services {
		host := o.Release + "-" + svc
		dns := []string{
			host, host + "." + o.Namespace, host + "." + o.Namespace + ".svc",
			host + "." + o.Namespace + ".svc.cluster.local", "localhost",
		}
		if o.ServerName != "" {
			dns = append(dns, o.ServerName)
		}
		certPEM, keyPEM, err := leaf(ca, filepath.Join(o.Dir, svc), pki.LeafOptions{
			ID:       pki.ServiceID(o.TrustDomain, svc),
			TTL:      90 * 24 * time.Hour,
			DNSNames: dns,
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			Server:   true,
		})
		if err != nil {
			return err
		}
		docs = append(docs, secret(o.Namespace, host+"-tls", "kubernetes.io/tls", map[string][]byte{
			"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": rootPEM,
		}))
	}
	if _, _, err := leaf(ca, filepath.Join(o.Dir, "meshctl"), pki.LeafOptions{
		ID: pki.ServiceID(o.TrustDomain, "meshctl"), TTL: 90 * 24 * time.Hour,
	}); err != nil {
		return err
	}

	var lines strings.Builder
	for _, c := range o.StaticClusters {
		if err := pki.ValidateName(c); err != nil {
			return fmt.Errorf("static cluster %q: %w", c, err)
		}
		tok, err := token(filepath.Join(o.Dir, "token-"+c))
		if err != nil {
			return err
		}
		fmt.Fprintf(&lines, "%s %s\n", c, tok)
		docs = append(docs, secret(o.Namespace, "meshplane-dev-agent-token-"+c, "Opaque", map[string][]byte{"token": []byte(tok)}))
	}
	docs = append(docs, secret(o.Namespace, "meshplane-dev-bootstrap-tokens", "Opaque", map[string][]byte{"tokens": []byte(lines.String())}))

	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return fmt.Errorf("encode secret: %w", err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

// leaf reuses base.crt/base.key while the certificate is valid for another
// week and still names the same DNS names, and issues a new pair otherwise.
// Reuse keeps the Secrets stable, so re-running the Tiltfile changes nothing.
func leaf(ca *pki.CA, base string, opts pki.LeafOptions) (certPEM, keyPEM []byte, err error) {
	certFile, keyFile := base+".crt", base+".key"
	certPEM, cerr := os.ReadFile(certFile)
	keyPEM, kerr := os.ReadFile(keyFile)
	if cerr == nil && kerr == nil && reusable(ca, certPEM, opts) {
		return certPEM, keyPEM, nil
	}
	if cerr != nil && !errors.Is(cerr, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read %s: %w", certFile, cerr)
	}
	certPEM, keyPEM, err = ca.IssueKeyPair(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", opts.ID, err)
	}
	if err := pki.WriteFileAtomic(certFile, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := pki.WriteFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func reusable(ca *pki.CA, certPEM []byte, opts pki.LeafOptions) bool {
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil || len(certs) == 0 {
		return false
	}
	c := certs[0]
	if time.Until(c.NotAfter) < 7*24*time.Hour || !slices.Equal(c.DNSNames, opts.DNSNames) {
		return false
	}
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// token reads a static bootstrap token from file, or makes one.
func token(file string) (string, error) {
	if b, err := os.ReadFile(file); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	t := "mpdev_" + hex.EncodeToString(raw[:])
	if err := pki.WriteFileAtomic(file, []byte(t+"\n"), 0o600); err != nil {
		return "", err
	}
	return t, nil
}

func secret(ns, name, typ string, data map[string][]byte) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":      name,
			"namespace": ns,
			"labels":    map[string]string{"app.kubernetes.io/part-of": "meshplane", "app.kubernetes.io/managed-by": "tilt"},
		},
		"type": typ,
		"data": data, // []byte marshals to base64, as data wants
	}
}
