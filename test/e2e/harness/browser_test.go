package harness

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
)

// The browser opens an HTTPS page whose certificate it was told to accept,
// reads it, and reports the Content-Security-Policy violation of an inline
// script, which the console's tests count as a failure.
func TestBrowserPinsTheServerKeyAndReportsCSPViolations(t *testing.T) {
	RequireE2E(t)
	dir := t.TempDir()
	p, err := NewPKI(dir, "e2e.test")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := p.ServiceCert("console")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, `<!doctype html><title>t</title><p id="p">served over TLS</p><script>document.title = "inline ran"</script>`)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// The second browser's refused handshakes are expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	b := StartBrowser(t, certFile, filepath.Join(dir, "shots"))
	if err := chromedp.Do(b.Ctx, chromedp.Navigate("https://"+ln.Addr().String()+"/"), chromedp.WaitVisible("#p")); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(b.Ctx, chromedp.Text("#p"))
	if err != nil || text != "served over TLS" {
		t.Fatalf("page text = %q, %v", text, err)
	}
	title, err := chromedp.Run(b.Ctx, chromedp.Title())
	if err != nil || title != "t" {
		t.Fatalf("title = %q, %v; want the inline script blocked by the CSP", title, err)
	}
	shot := b.Screenshot(t, "page")
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	platformtest.Eventually(t, 10*time.Second, "the CSP violation reported", func() bool {
		return slices.ContainsFunc(b.Problems(), func(s string) bool { return strings.Contains(s, "Content Security Policy") })
	})

	// A server key the browser was not told about is refused.
	other := StartBrowser(t, filepath.Join(p.CADir, pki.RootCertFile), filepath.Join(dir, "shots2"))
	if err := chromedp.Do(other.Ctx, chromedp.Navigate("https://"+ln.Addr().String()+"/")); err == nil {
		if text, _ := chromedp.Run(other.Ctx, chromedp.Text("body")); strings.Contains(text, "served over TLS") {
			t.Fatal("a browser pinned to another key opened the page")
		}
	}
}
