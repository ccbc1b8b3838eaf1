package harness

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package puts the browser;
// $MESHPLANE_CHROMIUM overrides it.
const ChromiumPath = "/usr/bin/chromium"

// Browser is a headless Chromium driven over the DevTools protocol
// (chromedp). It trusts exactly one server key, so that the console's real
// certificate is checked without importing a CA into the browser.
type Browser struct {
	// Ctx runs chromedp actions in the browser's one tab.
	Ctx context.Context
	// ArtifactDir receives screenshots.
	ArtifactDir string

	mu       sync.Mutex
	problems []string
}

// StartBrowser starts headless Chromium for t. serverCertFile is the PEM
// certificate of the HTTPS server the test opens: the browser accepts that
// key (--ignore-certificate-errors-spki-list) and no other untrusted one.
// Screenshots go to artifactDir. The browser is stopped when t ends.
func StartBrowser(t testing.TB, serverCertFile, artifactDir string) *Browser {
	t.Helper()
	path := os.Getenv("MESHPLANE_CHROMIUM")
	if path == "" {
		path = ChromiumPath
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("the browser tests need Debian's Chromium at %s: install it with 'apt-get install -y chromium' (or 'make tools'), or set $MESHPLANE_CHROMIUM (%v)", path, err)
	}
	spki, err := spkiHash(serverCertFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(artifactDir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1440, 960),
		// This machine's network is closed: no background fetches, no
		// component updates, no QUIC probes.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", spki),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &Browser{Ctx: ctx, ArtifactDir: artifactDir}
	// Subscribe before the first page, so that nothing it reports is lost.
	messages := chromedp.Console(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			b.keep(m)
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done
	})
	return b
}

// keep records what the page reports as broken: uncaught exceptions, and
// errors in the console or the browser's log, where Content-Security-Policy
// violations appear.
func (b *Browser) keep(m chromedp.ConsoleMessage) {
	if m.Type != chromedp.ConsoleError && !m.IsException() {
		return
	}
	b.mu.Lock()
	b.problems = append(b.problems, strings.TrimSpace(fmt.Sprintf("%s %s %s", m.String(), m.Source, m.URL)))
	b.mu.Unlock()
}

// Problems returns what the page reported as broken so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Screenshot saves the whole page as <ArtifactDir>/<name>.png.
func (b *Browser) Screenshot(t testing.TB, name string) string {
	t.Helper()
	buf, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.ArtifactDir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// spkiHash is Chromium's pin of a certificate's key: the base64 SHA-256 of
// its SubjectPublicKeyInfo.
func spkiHash(certFile string) (string, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return "", fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", certFile, err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}
