package service_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	consolev1 "github.com/meshplane/meshplane/libs/gen/meshplane/console/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/console/v1/consolev1connect"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/services/console/service"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/timestamppb"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// clock is the console's session clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// console is a console served over HTTPS on loopback against a plane and a
// real kube-apiserver.
type console struct {
	base  string
	hc    *http.Client
	kube  kubernetes.Interface
	clock *clock
	reg   *prometheus.Registry
}

var static = fstest.MapFS{
	"index.html":         {Data: []byte(`<!doctype html><html><head><script type="module" src="/assets/app-1234.js"></script></head><body><div id="root"></div></body></html>`)},
	"assets/app-1234.js": {Data: []byte(`console.log("meshplane")`)},
}

// startConsole starts a kube-apiserver, a plane and a console against
// both, and returns the console's HTTPS client and address.
func startConsole(t *testing.T, p *plane) *console {
	t.Helper()
	kc := kubetest.Start(t, kubetest.Options{SkipIstioCRDs: true})
	dir := t.TempDir()
	certFile, keyFile := platformtest.WriteKeyPair(t, dir, "console", p.ca.ServerCert(t))
	cfg := service.DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	cfg.ManagementAddr = p.addr
	consoleCert := p.consoleCert(t)
	cfg.Upstream = p.ca.ClientOptions(t, p.addr, &consoleCert)
	cfg.PollInterval = 100 * time.Millisecond
	c := &clock{t: time.Now()}
	ln := platformtest.Listen(t)
	reg := prometheus.NewRegistry()
	svc, err := service.New(cfg, service.WithKubeClient(kc.Clientset()), service.WithStatic(static), service.WithListener(ln),
		service.WithClock(c.now), service.WithLogger(slog.New(slog.DiscardHandler)), service.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console stopped with an error: %v", err)
		}
	})
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	return &console{base: "https://" + ln.Addr().String(), hc: &http.Client{Transport: tr}, kube: kc.Clientset(), clock: c, reg: reg}
}

// token creates a service account, binds it to the viewer ClusterRole when
// viewer is set, and returns a token for it.
func (c *console) token(t *testing.T, name string, viewer bool) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.kube.CoreV1().Namespaces().Get(ctx, "ops", metav1.GetOptions{}); err != nil {
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rules := []rbacv1.PolicyRule{
			{APIGroups: []string{"multicluster.meshplane.dev"}, Resources: []string{"kubernetesclusters", "kubernetesclusters/output", "kubernetesclusters/accesslogs"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"discovery.meshplane.dev"}, Resources: []string{"destinations", "workloads", "meshes"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"networking.meshplane.dev"}, Resources: []string{"trafficpolicies", "accesspolicies", "virtualmeshes", "virtualdestinations", "wasmdeploymentpolicies"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"observability.meshplane.dev"}, Resources: []string{"accesslogpolicies"}, Verbs: []string{"get", "list"}},
		}
		if _, err := c.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "meshplane-console-viewer"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.kube.CoreV1().ServiceAccounts("ops").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if viewer {
		if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-console"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "meshplane-console-viewer"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "ops"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := c.kube.CoreV1().ServiceAccounts("ops").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func (c *console) post(t *testing.T, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	if res.ProtoMajor != 2 {
		t.Errorf("%s answered over %s, want HTTP/2", path, res.Proto)
	}
	return res
}

// session is a signed-in browser: its cookies and CSRF token.
type session struct{ id, csrf string }

func (c *console) signIn(t *testing.T, token string) session {
	t.Helper()
	res := c.post(t, "/auth/login", `{"token":"`+token+`"}`, nil)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("sign-in: %s %s", res.Status, b)
	}
	var s session
	for _, ck := range res.Cookies() {
		switch ck.Name {
		case "mp_session":
			s.id = ck.Value
		case "mp_csrf":
			s.csrf = ck.Value
		}
	}
	return s
}

// client is a ConsoleService client that sends s's cookie and csrf as the
// CSRF header.
func (c *console) client(s session, csrf string) consolev1connect.ConsoleServiceClient {
	add := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if s.id != "" {
				req.Header().Set("Cookie", "mp_session="+s.id+"; mp_csrf="+s.csrf)
			}
			if csrf != "" {
				req.Header().Set("X-CSRF-Token", csrf)
			}
			return next(ctx, req)
		}
	})
	return consolev1connect.NewConsoleServiceClient(c.hc, c.base+"/api", connect.WithInterceptors(add))
}

func TestSignInCookiesAndCSRF(t *testing.T) {
	c := startConsole(t, startPlane(t))
	good := c.token(t, "alice", true)

	res := c.post(t, "/auth/login", `{"token":"not-a-token"}`, nil)
	var body map[string]string
	_ = json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusUnauthorized || body["error"] != "the token was not accepted by the management cluster" {
		t.Errorf("bad token: %s %v", res.Status, body)
	}
	if res := c.post(t, "/auth/login", `{"token":`, nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed body: %s, want 400", res.Status)
	}
	if res := c.post(t, "/auth/login", `{"token":"`+strings.Repeat("x", 17<<10)+`"}`, nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("17 KiB body: %s, want 400", res.Status)
	}

	if res := c.post(t, "/auth/login", `{"token":"`+good+`"}`, map[string]string{"Content-Type": "text/plain"}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a form-encodable sign-in (text/plain): %s, want 400", res.Status)
	}
	res = c.post(t, "/auth/login", `{"token":"`+good+`"}`, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("good token: %s", res.Status)
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	if body["username"] != "system:serviceaccount:ops:alice" {
		t.Errorf("username = %q", body["username"])
	}
	if _, err := time.Parse(time.RFC3339, body["expiresAt"]); err != nil {
		t.Errorf("expiresAt %q: %v", body["expiresAt"], err)
	}
	var s session
	for _, ck := range res.Cookies() {
		if !ck.Secure || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" {
			t.Errorf("cookie %s: Secure=%v SameSite=%v Path=%q", ck.Name, ck.Secure, ck.SameSite, ck.Path)
		}
		switch ck.Name {
		case "mp_session":
			s.id = ck.Value
			if !ck.HttpOnly {
				t.Error("mp_session is not HttpOnly")
			}
		case "mp_csrf":
			s.csrf = ck.Value
			if ck.HttpOnly {
				t.Error("mp_csrf is HttpOnly; the page cannot read it")
			}
		}
	}
	if s.id == "" || s.csrf == "" || strings.Contains(res.Header.Get("Set-Cookie"), good) {
		t.Fatalf("cookies = %v", res.Cookies())
	}
	ctx := context.Background()
	for name, cl := range map[string]consolev1connect.ConsoleServiceClient{
		"no session": c.client(session{}, s.csrf),
		"no CSRF":    c.client(s, ""),
		"wrong CSRF": c.client(s, s.csrf+"x"),
		"unknown id": c.client(session{id: "forged", csrf: s.csrf}, s.csrf),
	} {
		if _, err := cl.WhoAmI(ctx, connect.NewRequest(&consolev1.WhoAmIRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s: %v, want unauthenticated", name, err)
		}
	}
	who, err := c.client(s, s.csrf).WhoAmI(ctx, connect.NewRequest(&consolev1.WhoAmIRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(who.Msg.GetViews(), ","); got != "overview,graph,policies,describe,output,accesslogs" {
		t.Errorf("views = %s", got)
	}
	if res := c.post(t, "/auth/logout", "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("logout without session and CSRF: %s, want 401", res.Status)
	}
	if res := c.post(t, "/auth/logout", "", map[string]string{"Cookie": "mp_session=" + s.id, "X-CSRF-Token": "wrong"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("logout with a wrong CSRF token: %s, want 401", res.Status)
	}
	res = c.post(t, "/auth/logout", "", map[string]string{"Cookie": "mp_session=" + s.id, "X-CSRF-Token": s.csrf})
	if res.StatusCode != http.StatusNoContent {
		t.Errorf("logout: %s, want 204", res.Status)
	}
	for _, ck := range res.Cookies() {
		if ck.MaxAge >= 0 {
			t.Errorf("cookie %s not cleared: %v", ck.Name, ck)
		}
	}
	if _, err := c.client(s, s.csrf).WhoAmI(ctx, connect.NewRequest(&consolev1.WhoAmIRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("after logout: %v, want unauthenticated", err)
	}
	if got := testutil.ToFloat64(counter(t, c.reg, "meshplane_console_sign_ins_total", "refused")); got != 1 {
		t.Errorf("refused sign-ins = %v, want 1 (the bad token)", got)
	}
	if got := testutil.ToFloat64(counter(t, c.reg, "meshplane_console_sign_ins_total", "ok")); got != 1 {
		t.Errorf("sign-ins = %v, want 1", got)
	}
}

// counter finds the sample of a counter family with one label value.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, m.GetCounter().GetValue)
				}
			}
		}
	}
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return 0 })
}

func TestSessionExpiresWhenIdle(t *testing.T) {
	c := startConsole(t, startPlane(t))
	s := c.signIn(t, c.token(t, "alice", true))
	cl := c.client(s, s.csrf)
	ctx := context.Background()
	if _, err := cl.WhoAmI(ctx, connect.NewRequest(&consolev1.WhoAmIRequest{})); err != nil {
		t.Fatal(err)
	}
	c.clock.add(service.DefaultSessionIdle + time.Second)
	if _, err := cl.WhoAmI(ctx, connect.NewRequest(&consolev1.WhoAmIRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("idle session: %v, want unauthenticated", err)
	}
}

func TestSecurityHeadersAndSPA(t *testing.T) {
	c := startConsole(t, startPlane(t))
	get := func(path string) (*http.Response, string) {
		res, err := c.hc.Get(c.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	for _, path := range []string{"/", "/policies/TrafficPolicy/bookinfo/reviews", "/graph"} {
		res, body := get(path)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `<div id="root">`) || res.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: %s cache %q body %q, want index.html", path, res.Status, res.Header.Get("Cache-Control"), body)
		}
		for h, want := range map[string]string{
			"Content-Security-Policy":   "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
			"X-Content-Type-Options":    "nosniff",
			"Referrer-Policy":           "no-referrer",
			"X-Frame-Options":           "DENY",
			"Strict-Transport-Security": "max-age=31536000",
		} {
			if got := res.Header.Get(h); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, h, got, want)
			}
		}
	}
	res, body := get("/assets/app-1234.js")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "meshplane") || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("asset: %s cache %q", res.Status, res.Header.Get("Cache-Control"))
	}
	if res, _ := get("/assets/missing.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("missing asset: %s, want 404", res.Status)
	}
	res = c.post(t, "/auth/login", `{}`, nil)
	if res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("auth response headers: %v", res.Header)
	}
}

func TestOverviewAndPoliciesAgainstAPlane(t *testing.T) {
	p := startPlane(t)
	c := startConsole(t, p)
	p.push(t, &snapshotv1.InputSnapshot{Cluster: "east", Version: "in-1",
		Meshes: []*discoveryv1.Mesh{{Metadata: &commonv1.ObjectMeta{Name: "istiod", Namespace: "istio-system", Cluster: "east"}}},
		Destinations: []*discoveryv1.Destination{{
			Metadata: &commonv1.ObjectMeta{Name: "reviews-bookinfo-east", Namespace: "meshplane", Cluster: "east"},
			Spec: &discoveryv1.DestinationSpec{Mesh: &commonv1.ObjectRef{Name: "istiod", Namespace: "istio-system"},
				Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{Ref: &commonv1.ClusterObjectRef{Name: "reviews", Namespace: "bookinfo", Cluster: "east"}}}},
		}},
		TrafficPolicies: []*networkingv1.TrafficPolicy{{
			Metadata: &commonv1.ObjectMeta{Name: "reviews-retries", Namespace: "bookinfo", Cluster: "east", Generation: 1},
			Spec:     &networkingv1.TrafficPolicySpec{},
		}}})
	ctx := context.Background()
	s := c.signIn(t, c.token(t, "alice", true))
	cl := c.client(s, s.csrf)

	var policies []*consolev1.Policy
	platformtest.Eventually(t, 10*time.Second, "the TrafficPolicy is listed", func() bool {
		res, err := cl.ListPolicies(ctx, connect.NewRequest(&consolev1.ListPoliciesRequest{}))
		if err != nil {
			t.Logf("ListPolicies: %v", err)
			return false
		}
		policies = res.Msg.GetPolicies()
		return len(policies) > 0
	})
	if p := policies[0]; p.GetKind() != "TrafficPolicy" || p.GetName() != "reviews-retries" || p.GetNamespace() != "bookinfo" || p.GetCluster() != "east" || p.GetState() == "" {
		t.Errorf("policy = %v", p)
	}
	ov, err := cl.GetOverview(ctx, connect.NewRequest(&consolev1.GetOverviewRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !ov.Msg.GetSafeMode().GetChecked() || len(ov.Msg.GetServices()) != 4 || ov.Msg.GetServices()[0].GetStatus() != "SERVING" {
		t.Errorf("overview = %v, want ingest SERVING first and safe mode checked", ov.Msg)
	}
	var notedRegistration bool
	for _, n := range ov.Msg.GetNotes() {
		notedRegistration = notedRegistration || strings.Contains(n, "certificates not checked")
	}
	if !notedRegistration {
		t.Errorf("notes = %q, want registration noted as not checked", ov.Msg.GetNotes())
	}
	out, err := cl.GetOutput(ctx, connect.NewRequest(&consolev1.GetOutputRequest{Cluster: "east"}))
	if err != nil || out.Msg.GetVersion() == "" || len(out.Msg.GetVersions()) == 0 {
		t.Errorf("output = %v, %v", out, err)
	}

	graph, err := cl.GetGraph(ctx, connect.NewRequest(&consolev1.GetGraphRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*consolev1.GraphNode{}
	for _, n := range graph.Msg.GetNodes() {
		nodes[n.GetId()] = n
	}
	if d := nodes["destination/reviews.bookinfo.east"]; d == nil || d.GetParent() != "mesh/istiod.istio-system.east" || nodes["cluster/east"] == nil {
		t.Errorf("graph nodes = %v, want the destination in its mesh in cluster east", graph.Msg.GetNodes())
	}
	desc, err := cl.Describe(ctx, connect.NewRequest(&consolev1.DescribeRequest{Kind: "TrafficPolicy", Name: "reviews-retries"}))
	if err != nil || len(desc.Msg.GetDescriptions()) != 1 || desc.Msg.GetDescriptions()[0].GetCluster() != "east" {
		t.Errorf("describe = %v, %v", desc, err)
	}
	if _, err := cl.Describe(ctx, connect.NewRequest(&consolev1.DescribeRequest{Kind: "pods"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("describe pods: %v, want invalid_argument", err)
	}

	// A user without the viewer role is denied, with the verb and resource.
	bob := c.signIn(t, c.token(t, "bob", false))
	_, err = c.client(bob, bob.csrf).GetOverview(ctx, connect.NewRequest(&consolev1.GetOverviewRequest{}))
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), `user "system:serviceaccount:ops:bob" may not list kubernetesclusters.multicluster.meshplane.dev`) {
		t.Errorf("bob's overview: %v, want permission_denied naming the verb and resource", err)
	}
	if _, err := c.client(bob, bob.csrf).ListPolicies(ctx, connect.NewRequest(&consolev1.ListPoliciesRequest{})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("bob's policies: %v, want permission_denied", err)
	}
}

func TestTailAccessLogs(t *testing.T) {
	p := startPlane(t)
	c := startConsole(t, p)
	s := c.signIn(t, c.token(t, "alice", true))
	p.pushAccessLogs(t, "east", &observabilityv1.AccessLogEntry{
		Cluster: "east", Direction: "outbound", Authority: "reviews.bookinfo.svc.cluster.local:9080", Path: "/reviews/1", ResponseCode: 503,
		Workload: &commonv1.ClusterObjectRef{Name: "productpage-1", Namespace: "bookinfo", Cluster: "east"}, StartTime: timestamppb.Now(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Streams send the headers with the request: the interceptor of
	// client() covers unary calls only.
	hdr := func(h http.Header) {
		h.Set("Cookie", "mp_session="+s.id)
		h.Set("X-CSRF-Token", s.csrf)
	}
	cl := consolev1connect.NewConsoleServiceClient(c.hc, c.base+"/api")
	req := connect.NewRequest(&consolev1.TailAccessLogsRequest{Cluster: "east", MinResponseCode: 500})
	hdr(req.Header())
	stream, err := cl.TailAccessLogs(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("no entries: %v", stream.Err())
	}
	es := stream.Msg().GetEntries()
	if len(es) != 1 || es[0].GetPath() != "/reviews/1" || es[0].GetResponseCode() != 503 {
		t.Errorf("entries = %v", es)
	}

	// Without the CSRF header the stream is refused.
	bad := connect.NewRequest(&consolev1.TailAccessLogsRequest{})
	bad.Header().Set("Cookie", "mp_session="+s.id)
	st2, err := cl.TailAccessLogs(ctx, bad)
	if err == nil {
		st2.Receive()
		err = st2.Err()
		_ = st2.Close()
	}
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("stream without CSRF: %v, want unauthenticated", err)
	}
}
