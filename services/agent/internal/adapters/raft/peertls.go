package raft

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// The two ways a Raft peer proves it belongs to the cluster, negotiated
// with ALPN. A replica offers what it has; the one accepting picks the
// first it also has.
const (
	// protoCluster: both ends present the cluster's agent certificate,
	// signed by the plane's CA (the trust bundle of the credentials).
	protoCluster = "meshplane-raft/cluster"
	// protoBootstrap: both ends present a self-signed certificate whose
	// key is bound, by an HMAC under a key derived from the cluster's
	// bootstrap token, to this cluster. It lets a replica that has no
	// credentials yet (they reach it through Raft) join the group: it
	// holds the token, as every replica does, and nothing more.
	protoBootstrap = "meshplane-raft/bootstrap"
)

// bootstrapCN names bootstrap certificates. A server that wants one lists
// this name as the only acceptable CA, which is how the dialing replica
// learns which certificate to present.
const bootstrapCN = "meshplane raft bootstrap"

// PeerTLS secures the Raft port with mutual TLS. Raft's RPCs, membership
// probes and leave requests all run inside it, and a plain connection is
// refused. A peer is admitted only with a certificate for this cluster:
// the agent certificate the plane issued to it (and to no other cluster),
// or, while it has none, a bootstrap certificate bound to the cluster's
// bootstrap token.
type PeerTLS struct {
	// Cluster and TrustDomain name the only cluster admitted.
	Cluster, TrustDomain string
	// Credentials returns this replica's agent credentials, or
	// app.ErrNoCredentials before it has any. It is called at every
	// handshake, so a renewed certificate is used (and a renewed peer's
	// accepted) from the next connection on, and the Raft group never
	// depends on one certificate.
	Credentials func() (app.Credentials, error)
	// BootstrapKey is derived from the bootstrap token; nil admits agent
	// certificates only.
	BootstrapKey []byte
	// Log receives refused handshakes, and Refused (when set) counts them.
	Log     *slog.Logger
	Refused func()

	once      sync.Once
	bootstrap *tls.Certificate
	bootErr   error
	now       func() time.Time
}

// peerMaterial is what one handshake works with.
type peerMaterial struct {
	cert  *tls.Certificate // the agent certificate; nil without credentials
	roots *x509.CertPool
}

func (p *PeerTLS) material() (peerMaterial, error) {
	c, err := p.Credentials()
	if errors.Is(err, app.ErrNoCredentials) {
		return peerMaterial{}, nil
	}
	if err != nil {
		return peerMaterial{}, fmt.Errorf("read the agent credentials: %w", err)
	}
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return peerMaterial{}, fmt.Errorf("the agent credentials: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.BundlePEM) {
		return peerMaterial{}, errors.New("the agent credentials hold no trust bundle")
	}
	return peerMaterial{cert: &cert, roots: roots}, nil
}

// bootstrapCert returns this process's bootstrap certificate, made once.
func (p *PeerTLS) bootstrapCert() (*tls.Certificate, error) {
	p.once.Do(func() {
		if p.BootstrapKey == nil {
			p.bootErr = errors.New("no bootstrap token")
			return
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			p.bootErr = err
			return
		}
		spki, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			p.bootErr = err
			return
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			p.bootErr = err
			return
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: serial,
			Subject:      pkix.Name{CommonName: bootstrapCN},
			NotBefore:    now.Add(-time.Minute),
			NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			URIs:         []*url.URL{p.binding(spki)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			p.bootErr = err
			return
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			p.bootErr = err
			return
		}
		p.bootstrap = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	})
	return p.bootstrap, p.bootErr
}

// binding is the URI SAN that binds a public key to this cluster:
// urn:meshplane:raft-bootstrap:<cluster>:<HMAC of the cluster and key>.
func (p *PeerTLS) binding(spki []byte) *url.URL {
	m := hmac.New(sha256.New, p.BootstrapKey)
	m.Write([]byte("meshplane raft peer v1\x00" + p.Cluster + "\x00"))
	m.Write(spki)
	return &url.URL{Scheme: "urn", Opaque: "meshplane:raft-bootstrap:" + p.Cluster + ":" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
}

// offers lists the ways this replica can authenticate, best first.
func (p *PeerTLS) offers(m peerMaterial) []string {
	var out []string
	if m.cert != nil {
		out = append(out, protoCluster)
	}
	if p.BootstrapKey != nil {
		out = append(out, protoBootstrap)
	}
	return out
}

// serverConfig is the accepting side's configuration for one connection.
func (p *PeerTLS) serverConfig(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	m, err := p.material()
	if err != nil {
		return nil, err
	}
	var proto string
	for _, want := range p.offers(m) {
		if slices.Contains(hello.SupportedProtos, want) {
			proto = want
			break
		}
	}
	conf := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAnyClientCert,
		NextProtos: []string{proto},
	}
	switch proto {
	case protoCluster:
		conf.Certificates = []tls.Certificate{*m.cert}
		conf.ClientCAs = m.roots
	case protoBootstrap:
		boot, err := p.bootstrapCert()
		if err != nil {
			return nil, err
		}
		conf.Certificates = []tls.Certificate{*boot}
		conf.ClientCAs = x509.NewCertPool()
		conf.ClientCAs.AddCert(boot.Leaf)
	default:
		return nil, fmt.Errorf("raft peer offers %v, and this replica can authenticate with %v", hello.SupportedProtos, p.offers(m))
	}
	conf.VerifyConnection = func(cs tls.ConnectionState) error {
		return p.verify(proto, cs.PeerCertificates, m.roots)
	}
	return conf, nil
}

// clientConfig is the dialing side's configuration for one connection.
func (p *PeerTLS) clientConfig() (*tls.Config, error) {
	m, err := p.material()
	if err != nil {
		return nil, err
	}
	offers := p.offers(m)
	if len(offers) == 0 {
		return nil, errors.New("raft: this replica has neither agent credentials nor a bootstrap token to authenticate to its peers with")
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: offers,
		// The peer's certificate is checked below, against this cluster's
		// CA and name or its bootstrap binding: not a host name.
		InsecureSkipVerify: true,
		GetClientCertificate: func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if boot, err := p.bootstrapCert(); err == nil {
				for _, ca := range cri.AcceptableCAs {
					if bytes.Equal(ca, boot.Leaf.RawSubject) {
						return boot, nil
					}
				}
			}
			if m.cert == nil {
				return nil, errors.New("raft: the peer wants the agent certificate, which this replica does not have yet")
			}
			return m.cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return p.verify(cs.NegotiatedProtocol, cs.PeerCertificates, m.roots)
		},
	}, nil
}

// verify admits a peer's chain for the negotiated way.
func (p *PeerTLS) verify(proto string, chain []*x509.Certificate, roots *x509.CertPool) error {
	if len(chain) == 0 {
		return errors.New("raft peer presented no certificate")
	}
	leaf := chain[0]
	now := time.Now()
	if p.now != nil {
		now = p.now()
	}
	switch proto {
	case protoCluster:
		if roots == nil {
			return errors.New("raft peer presented an agent certificate, and this replica has no trust bundle to check it")
		}
		inter := x509.NewCertPool()
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return fmt.Errorf("raft peer certificate: %w", err)
		}
		id, err := platform.IdentityFromCertificate(leaf)
		if err != nil {
			return fmt.Errorf("raft peer certificate: %w", err)
		}
		if id.Kind != platform.KindCluster || id.Name != p.Cluster || id.TrustDomain != p.TrustDomain {
			return fmt.Errorf("raft peer is %s, not an agent of cluster %s", id, p.Cluster)
		}
		return nil
	case protoBootstrap:
		if p.BootstrapKey == nil {
			return errors.New("raft peer presented a bootstrap certificate, and this replica has no bootstrap token")
		}
		if len(chain) != 1 || now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) || len(leaf.URIs) != 1 {
			return errors.New("raft peer bootstrap certificate is malformed or out of its validity")
		}
		want := p.binding(leaf.RawSubjectPublicKeyInfo)
		if !hmac.Equal([]byte(leaf.URIs[0].String()), []byte(want.String())) {
			return fmt.Errorf("raft peer bootstrap certificate is not bound to cluster %s's bootstrap token", p.Cluster)
		}
		return nil
	}
	return fmt.Errorf("raft peer negotiated %q", proto)
}

// refused logs and counts a connection whose handshake failed: a plain
// connection, no or a wrong certificate, or no common way to
// authenticate.
func (p *PeerTLS) refused(remote net.Addr, err error) {
	if p.Log != nil {
		p.Log.Warn("refused a raft peer", "peer", remote.String(), "error", err)
	}
	if p.Refused != nil {
		p.Refused()
	}
}

// dial opens a mutual-TLS connection to a peer.
func (p *PeerTLS) dial(ctx context.Context, addr string) (net.Conn, error) {
	conf, err := p.clientConfig()
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{Config: conf}
	return d.DialContext(ctx, "tcp", addr)
}

// listen wraps the Raft port: every accepted connection is TLS, with the
// configuration chosen per handshake.
func (p *PeerTLS) listen(ln net.Listener) net.Listener {
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: p.serverConfig})
}
