package files

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

func credentials(t *testing.T, ca *pki.CA, ttl time.Duration) app.Credentials {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueKeyPair(pki.LeafOptions{ID: pki.ClusterID("meshplane.test", "east"), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return app.Credentials{CertPEM: certPEM, KeyPEM: keyPEM, BundlePEM: ca.TrustBundlePEM(), NotAfter: certs[0].NotAfter}
}

func TestCredentialsRoundTrip(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	store := Credentials{Dir: filepath.Join(t.TempDir(), "state", "agent")}

	if _, err := store.Load(t.Context()); !errors.Is(err, app.ErrNoCredentials) {
		t.Fatalf("Load before Save = %v, want ErrNoCredentials", err)
	}

	for i, ttl := range []time.Duration{time.Hour, 2 * time.Hour} { // the second Save replaces the first
		want := credentials(t, ca, ttl)
		if err := store.Save(t.Context(), want); err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
		got, err := store.Load(t.Context())
		if err != nil {
			t.Fatalf("Load %d: %v", i, err)
		}
		if !bytes.Equal(got.CertPEM, want.CertPEM) || !bytes.Equal(got.KeyPEM, want.KeyPEM) || !bytes.Equal(got.BundlePEM, want.BundlePEM) {
			t.Errorf("Load %d returned other PEM than was saved", i)
		}
		// NotAfter is not stored: it is read from the certificate.
		if !got.NotAfter.Equal(want.NotAfter) {
			t.Errorf("NotAfter = %v, want %v", got.NotAfter, want.NotAfter)
		}
	}

	for name, mode := range map[string]os.FileMode{KeyFile: 0o600, CertFile: 0o644, BundleFile: 0o644} {
		fi, err := os.Stat(filepath.Join(store.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	entries, err := os.ReadDir(store.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("state dir holds %v, want only the three files (no temporaries left)", names)
	}
}

func TestCredentialsLoadErrors(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	cred := credentials(t, ca, time.Hour)
	tests := []struct {
		name          string
		files         map[string][]byte
		missingDir    bool
		wantNoCreds   bool
		wantAnotherEr bool
	}{
		{name: "directory does not exist", missingDir: true, wantNoCreds: true},
		{name: "empty directory", files: map[string][]byte{}, wantNoCreds: true},
		{name: "key without certificate", files: map[string][]byte{KeyFile: cred.KeyPEM}, wantNoCreds: true},
		{name: "certificate without key", files: map[string][]byte{CertFile: cred.CertPEM, BundleFile: cred.BundlePEM}, wantAnotherEr: true},
		{name: "certificate without bundle", files: map[string][]byte{CertFile: cred.CertPEM, KeyFile: cred.KeyPEM}, wantAnotherEr: true},
		{name: "garbage certificate", files: map[string][]byte{CertFile: []byte("not PEM"), KeyFile: cred.KeyPEM, BundleFile: cred.BundlePEM}, wantAnotherEr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "agent")
			if !tt.missingDir {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				for name, data := range tt.files {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			_, err := Credentials{Dir: dir}.Load(t.Context())
			if got := errors.Is(err, app.ErrNoCredentials); got != tt.wantNoCreds {
				t.Errorf("Load = %v; ErrNoCredentials = %v, want %v", err, got, tt.wantNoCreds)
			}
			if tt.wantAnotherEr && err == nil {
				t.Errorf("Load = nil, want an error")
			}
		})
	}
}
