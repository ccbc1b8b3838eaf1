package tilt_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"sigs.k8s.io/yaml"
)

type secretDoc struct {
	Kind     string                           `json:"kind"`
	Type     string                           `json:"type"`
	Metadata struct{ Name, Namespace string } `json:"metadata"`
	Data     map[string][]byte                `json:"data"`
}

// devpkiArgs returns the devpki flags the Tiltfile passes, with -dir
// replaced by dir.
func devpkiArgs(t *testing.T, r *recorder, dir string) []string {
	t.Helper()
	const pkg = "./test/e2e/tilt/devpki"
	for _, c := range r.callsOf("local") {
		cmd := c.str(0, "command")
		_, rest, ok := strings.Cut(cmd, pkg)
		if !ok {
			continue
		}
		args := strings.Fields(rest)
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-dir" {
				args[i+1] = dir
			}
		}
		return args
	}
	t.Fatalf("the Tiltfile runs no %s", pkg)
	return nil
}

func runDevpki(t *testing.T, bin string, args []string) []secretDoc {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("devpki %v: %v\n%s", args, err, errb.String())
	}
	var docs []secretDoc
	for _, part := range strings.Split(out.String(), "\n---\n") {
		part = strings.TrimPrefix(part, "---\n")
		if strings.TrimSpace(part) == "" {
			continue
		}
		var d secretDoc
		if err := yaml.Unmarshal([]byte(part), &d); err != nil {
			t.Fatalf("devpki output is not YAML: %v\n%s", err, part)
		}
		docs = append(docs, d)
	}
	return docs
}

// TestDevPKI runs devpki with the Tiltfile's flags and checks that it makes
// every Secret the Tiltfile and the dev values name, with certificates the
// services accept.
func TestDevPKI(t *testing.T) {
	r := execTiltfile(t, loadTiltfile(t), nil)
	binDir := t.TempDir()
	if err := harness.Build(context.Background(), binDir, "./test/e2e/tilt/devpki"); err != nil {
		t.Fatal(err)
	}
	bin := harness.Binary(binDir, "devpki")
	dir := filepath.Join(t.TempDir(), "pki")
	args := devpkiArgs(t, r, dir)
	docs := runDevpki(t, bin, args)

	byName := map[string]secretDoc{}
	for _, d := range docs {
		if d.Kind != "Secret" || d.Metadata.Namespace != "meshplane" {
			t.Errorf("devpki printed %s %s/%s, want Secrets in meshplane", d.Kind, d.Metadata.Namespace, d.Metadata.Name)
		}
		byName[d.Metadata.Name] = d
	}

	// Every Secret somebody names exists.
	for _, name := range referencedSecrets(t, r) {
		if _, ok := byName[name]; !ok {
			t.Errorf("Secret %s is named by the Tiltfile or tilt/values but devpki does not make it (made: %v)", name, keys(byName))
		}
	}

	ca, err := pki.LoadCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatalf("registration cannot load the dev CA: %v", err)
	}
	for _, f := range []string{pki.RootCertFile, pki.IntermediateCertFile, pki.IntermediateKeyFile} {
		if want, _ := os.ReadFile(filepath.Join(dir, "ca", f)); !bytes.Equal(byName["meshplane-dev-ca"].Data[f], want) {
			t.Errorf("meshplane-dev-ca %s differs from %s", f, filepath.Join(dir, "ca", f))
		}
	}
	for _, svc := range []string{"registration", "ingest", "translation", "distribution"} {
		s := byName["meshplane-"+svc+"-tls"]
		if s.Type != "kubernetes.io/tls" {
			t.Errorf("%s: type %q", s.Metadata.Name, s.Type)
		}
		leaf := verifyLeaf(t, ca, s.Data["tls.crt"], x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
		if leaf == nil {
			continue
		}
		if id, err := pki.IDFromCertificate(leaf); err != nil || id != pki.ServiceID("meshplane.local", svc) {
			t.Errorf("%s: identity %v (%v), want %v", s.Metadata.Name, id, err, pki.ServiceID("meshplane.local", svc))
		}
		for _, dns := range []string{"meshplane-" + svc, "meshplane-" + svc + ".meshplane", "localhost", "management.meshplane.internal"} {
			if !slices.Contains(leaf.DNSNames, dns) {
				t.Errorf("%s: DNS names %v lack %s", s.Metadata.Name, leaf.DNSNames, dns)
			}
		}
		if !bytes.Equal(s.Data["ca.crt"], ca.TrustBundlePEM()) {
			t.Errorf("%s: ca.crt is not the dev root", s.Metadata.Name)
		}
	}
	// meshctl --pki-dir reads ca/root.crt, meshctl.crt and meshctl.key.
	ctl, _ := os.ReadFile(filepath.Join(dir, "meshctl.crt"))
	if leaf := verifyLeaf(t, ca, ctl, x509.ExtKeyUsageClientAuth); leaf != nil {
		if id, _ := pki.IDFromCertificate(leaf); id != pki.ServiceID("meshplane.local", "meshctl") {
			t.Errorf("meshctl.crt identity %v", id)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "meshctl.key")); err != nil {
		t.Error(err)
	}
	tokens := string(byName["meshplane-dev-bootstrap-tokens"].Data["tokens"])
	mgmtToken := string(byName["meshplane-dev-agent-token-mgmt"].Data["token"])
	if mgmtToken == "" || !strings.Contains(tokens, "mgmt "+mgmtToken+"\n") {
		t.Errorf("bootstrap tokens %q do not hold the mgmt agent's token %q", tokens, mgmtToken)
	}

	// A second run (every Tiltfile reload) changes nothing.
	again := runDevpki(t, bin, args)
	for _, d := range again {
		if prev := byName[d.Metadata.Name]; !equalData(prev.Data, d.Data) {
			t.Errorf("Secret %s changed on the second run", d.Metadata.Name)
		}
	}
}

func verifyLeaf(t *testing.T, ca *pki.CA, chainPEM []byte, usages ...x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCertificates(chainPEM)
	if err != nil || len(certs) == 0 {
		t.Errorf("certificate chain: %v", err)
		return nil
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	for _, u := range usages {
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("%s: does not verify for usage %v against the dev root: %v", certs[0].Subject, u, err)
		}
	}
	return certs[0]
}

// referencedSecrets are the Secrets the dev-pki resource groups, the dev
// values mount, and the helm set= values name.
func referencedSecrets(t *testing.T, r *recorder) []string {
	t.Helper()
	var names []string
	for _, c := range r.callsOf("k8s_resource") {
		for _, o := range c.strs(-1, "objects") {
			if parts := strings.Split(o, ":"); len(parts) >= 2 && strings.EqualFold(parts[1], "secret") {
				names = append(names, parts[0])
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(r.root, "tilt", "values", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			TLS struct {
				SecretName string `json:"secretName"`
			} `json:"tls"`
			CA struct {
				SecretName string `json:"secretName"`
			} `json:"ca"`
			BootstrapTokens struct {
				SecretName string `json:"secretName"`
			} `json:"bootstrapTokens"`
			CABundleSecret struct {
				Name string `json:"name"`
			} `json:"caBundleSecret"`
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, n := range []string{v.TLS.SecretName, v.CA.SecretName, v.BootstrapTokens.SecretName, v.CABundleSecret.Name} {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	for _, c := range r.callsOf("helm") {
		for _, s := range c.strs(-1, "set") {
			if k, v, ok := strings.Cut(s, "="); ok && strings.HasSuffix(k, "Secret.name") && v != "" {
				names = append(names, v)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("found no Secret references: the parsing above is stale")
	}
	return names
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestDevPKIRegistersCluster runs what the agent-<cluster> resources rely
// on: registration serving with devpki's certificate, CA and static tokens
// (as the dev values mount them), and `meshctl cluster register --pki-dir`
// accepted with devpki's meshctl certificate, printing the agent's values.
func TestDevPKIRegistersCluster(t *testing.T) {
	harness.RequireE2E(t)
	r := execTiltfile(t, loadTiltfile(t), nil)
	binDir := t.TempDir()
	if err := harness.Build(context.Background(), binDir, "./test/e2e/tilt/devpki", "./services/registration/cmd/registration", "./cmd/meshctl"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pki")
	docs := runDevpki(t, harness.Binary(binDir, "devpki"), devpkiArgs(t, r, dir))
	var tokens []byte
	for _, d := range docs {
		if d.Metadata.Name == "meshplane-dev-bootstrap-tokens" {
			tokens = d.Data["tokens"]
		}
	}
	tokensFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokensFile, tokens, 0o600); err != nil {
		t.Fatal(err)
	}

	rpc, err := harness.Listen()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := harness.Listen()
	if err != nil {
		t.Fatal(err)
	}
	p, err := harness.Start(harness.Spec{
		Name: "registration", Binary: harness.Binary(binDir, "registration"), LogDir: t.TempDir(),
		Args: []string{
			"--addr=fd:3", "--admin-addr=fd:4", "--log-format=text",
			"--tls-cert-file=" + filepath.Join(dir, "registration.crt"),
			"--tls-key-file=" + filepath.Join(dir, "registration.key"),
			"--tls-client-ca-file=" + filepath.Join(dir, "ca", pki.RootCertFile),
			"--ca-dir=" + filepath.Join(dir, "ca"),
			"--bootstrap-tokens-file=" + tokensFile,
		},
		Listeners: []*net.TCPListener{rpc, admin},
	})
	rpc.Close()
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// localhost, not 127.0.0.1: the name the port-forward is dialled by.
	addr := "localhost:" + strconv.Itoa(rpc.Addr().(*net.TCPAddr).Port)
	var out []byte
	err = harness.Wait(ctx, 20*time.Second, "meshctl cluster register", func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, harness.Binary(binDir, "meshctl"), "cluster", "register", "--cluster", "east",
			"--addr", addr, "--pki-dir", dir, "-o", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		o, err := cmd.Output()
		if err != nil {
			t.Logf("meshctl: %v: %s", err, stderr.String())
			return false, nil
		}
		out = o
		return true, nil
	}, p)
	if err != nil {
		t.Fatalf("%v\nregistration log:\n%s", err, p.LogTail(30))
	}
	var res struct {
		HelmValues map[string]string `json:"helmValues"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("meshctl -o json: %v\n%s", err, out)
	}
	for _, k := range []string{"cluster", "caBundle", "bootstrapToken", "trustDomain"} {
		if res.HelmValues[k] == "" {
			t.Errorf("helmValues lack %s: %v", k, res.HelmValues)
		}
	}
	if root, _ := os.ReadFile(filepath.Join(dir, "ca", pki.RootCertFile)); res.HelmValues["caBundle"] != string(root) {
		t.Errorf("caBundle is not the dev root:\n%s", res.HelmValues["caBundle"])
	}
}
