package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	consolev1 "github.com/meshplane/meshplane/libs/gen/meshplane/console/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/console/v1/consolev1connect"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	console "github.com/meshplane/meshplane/services/console/service"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	registration "github.com/meshplane/meshplane/services/registration/service"
	translation "github.com/meshplane/meshplane/services/translation/service"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAllInOneServesConsole: the all-in-one with --console-addr and
// --dev-pki-dir builds a console that reads the process's own front door
// with its dev service certificate: a signed-in user's overview has every
// service, registration included.
func TestAllInOneServesConsole(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{SkipIstioCRDs: true})
	dir := t.TempDir()
	caDir := filepath.Join(dir, "ca")
	ln := platformtest.Listen(t)
	srvOpts := platform.NewServerOptions()
	srvOpts.Addr, srvOpts.AdminAddr, srvOpts.TrustDomain = ln.Addr().String(), "", pki.DefaultTrustDomain
	srvOpts.TLS.ClientAuth = platform.ClientAuthOptional
	if err := devServerPKI(dir, caDir, pki.DefaultTrustDomain, &srvOpts); err != nil {
		t.Fatal(err)
	}
	s := settings{
		store: snapstore.DefaultConfig(), trustDomain: pki.DefaultTrustDomain, clusterDomain: "cluster.local", devPKIDir: dir,
		reg: registration.DefaultConfig(), ing: ingest.DefaultConfig(), tr: translation.DefaultConfig(), console: console.DefaultConfig(),
	}
	s.reg.CADir = caDir
	s.ing.WatchManagement = "false"
	s.tr.SafeStartWindow = 0
	s.console.Addr = "127.0.0.1:0"
	if err := consoleSettings(&s, srvOpts); err != nil {
		t.Fatal(err)
	}
	// Registration's kubeconfig would be the console's; the test gives the
	// console its own API server and leaves registration without one.
	s.console.Kubeconfig = kc.Kubeconfig()
	log := slog.New(slog.DiscardHandler)
	a, err := buildAll(s, registration.NewRevocationChecker(), log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if a.console == nil {
		t.Fatal("--console-addr built no console")
	}
	srv, err := platform.NewServer(srvOpts, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Mount(srv)
	srv.SetReady(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopped with an error: %v", err)
			}
		}
	})

	cs := kc.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("ops").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "admin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ops-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "admin", Namespace: "ops"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts("ops").CreateToken(ctx, "admin", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	web := httptest.NewUnstartedServer(a.console.Handler())
	web.EnableHTTP2 = true
	web.StartTLS()
	t.Cleanup(web.Close)
	res, err := web.Client().Post(web.URL+"/auth/login", "application/json", strings.NewReader(`{"token":"`+tok.Status.Token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %s", res.Status)
	}
	var cookie, csrf string
	for _, c := range res.Cookies() {
		cookie += c.Name + "=" + c.Value + "; "
		if c.Name == "mp_csrf" {
			csrf = c.Value
		}
	}
	hdr := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Cookie", cookie)
			req.Header().Set("X-CSRF-Token", csrf)
			return next(ctx, req)
		}
	})
	client := consolev1connect.NewConsoleServiceClient(web.Client(), web.URL+"/api", connect.WithInterceptors(hdr))
	var ov *consolev1.GetOverviewResponse
	platformtest.Eventually(t, 10*time.Second, "every service serves", func() bool {
		r, err := client.GetOverview(ctx, connect.NewRequest(&consolev1.GetOverviewRequest{}))
		if err != nil {
			t.Logf("GetOverview: %v", err)
			return false
		}
		ov = r.Msg
		for _, s := range ov.GetServices() {
			if s.GetStatus() != "SERVING" {
				return false
			}
		}
		return len(ov.GetServices()) == 4
	})
	if len(ov.GetNotes()) > 0 || !ov.GetSafeMode().GetChecked() {
		t.Errorf("overview notes %q, safe mode %v: registration and translation should both answer", ov.GetNotes(), ov.GetSafeMode())
	}
}
