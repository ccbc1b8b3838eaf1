package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// consoleRBAC is the management cluster's side of the console: a viewer
// bound to the ClusterRole the chart installs, and a service account with
// no role at all.
const consoleRBAC = `apiVersion: v1
kind: Namespace
metadata: {name: meshplane}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: console-viewer, namespace: meshplane}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody, namespace: meshplane}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: console-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: meshplane-console-viewer}
subjects:
- {kind: ServiceAccount, name: console-viewer, namespace: meshplane}
`

// consoleEstate is a management cluster, two workload clusters with
// bookinfo and Istio, a plane of four processes, their agents (east's with
// an Envoy port the test sends access logs to), and the console.
type consoleEstate struct {
	mgmt       *kubetest.Cluster
	workload   []*kubetest.Cluster
	procs      []*harness.Process
	url        string
	certFile   string
	eastEnvoy  string
	artifacts  string
	kubeconfig string
}

func startConsoleEstate(t *testing.T) *consoleEstate {
	t.Helper()
	es := startEstateWith(t, estateOptions{mgmt: true, federated: true, envoy: []string{"east"}})
	if err := es.mgmt.ApplyYAML(t.Context(), append([]byte(consoleRBAC+"---\n"), consoleViewerRole(t)...)); err != nil {
		t.Fatal(err)
	}
	e := &consoleEstate{
		mgmt: es.mgmt, workload: es.clusters, procs: es.procs, kubeconfig: es.mgmt.Kubeconfig(),
		eastEnvoy: es.envoy["east"],
	}
	e.startConsole(t, es.plane, t.TempDir())
	return e
}

// consoleViewerRole is the ClusterRole the console chart installs (its
// templates read the same file).
func consoleViewerRole(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "deploy", "charts", "console", "files", "viewer-clusterrole.yaml"))
	if err != nil {
		t.Fatalf("the console chart's viewer ClusterRole: %v", err)
	}
	return data
}

// startConsole runs the console binary as its chart does: its own
// certificate for the management services, a server certificate for
// browsers, and the management cluster's kubeconfig for TokenReview and
// SubjectAccessReview.
func (e *consoleEstate) startConsole(t testing.TB, plane *harness.Plane, dir string) {
	t.Helper()
	clientCert, clientKey, err := plane.PKI.ServiceCert("console")
	if err != nil {
		t.Fatal(err)
	}
	e.certFile = clientCert
	ln, err := harness.Listen()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := harness.Listen()
	if err != nil {
		t.Fatal(err)
	}
	e.url = "https://" + ln.Addr().String()
	proc, err := harness.Start(harness.Spec{
		Name: "console", Binary: harness.Binary(binDir, harness.CmdConsole), LogDir: filepath.Join(dir, "logs"),
		Args: []string{
			"--addr", "fd:3", "--admin-addr", "fd:4",
			"--tls-cert-file", clientCert, "--tls-key-file", clientKey,
			"--ingest-addr", plane.Ingest, "--translation-addr", plane.Translation,
			"--distribution-addr", plane.Distribution, "--registration-addr", plane.Registration,
			"--upstream-ca-file", plane.PKI.RootFile(), "--upstream-cert-file", clientCert, "--upstream-key-file", clientKey,
			"--upstream-server-name", "localhost",
			"--kubeconfig", e.mgmt.Kubeconfig(),
		},
		Listeners: []*net.TCPListener{ln, admin},
	})
	ln.Close()
	admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	e.procs = append(e.procs, proc)
	e.artifacts = filepath.Join(harness.ArtifactDir(), "console")
}

// token asks the management cluster for a service account's token, as
// `kubectl create token` does.
func (e *consoleEstate) token(t testing.TB, sa string) string {
	t.Helper()
	ttl := int64(3600)
	tr, err := e.mgmt.Clientset().CoreV1().ServiceAccounts("meshplane").CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// signIn signs in on the sign-in page with a service account's token.
func (e *consoleEstate) signIn(t testing.TB, b *harness.Browser, sa string) {
	t.Helper()
	e.wait(t, b, "sign-in as "+sa, 30*time.Second,
		chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", e.token(t, sa)), chromedp.Click("[data-testid=signin-submit]"),
		chromedp.WaitVisible("[data-testid=user]"))
}

// kubectlApply applies YAML to the management cluster with kubectl, as a
// user does.
func (e *consoleEstate) kubectlApply(t *testing.T, yaml string) {
	t.Helper()
	kubectl, err := kubetest.KubectlPath()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", e.kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(yaml)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// wait runs chromedp actions, failing the test with the plane's logs when
// they do not finish in time.
func (e *consoleEstate) wait(t testing.TB, b *harness.Browser, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		shot := b.Screenshot(t, "failed-"+strings.ReplaceAll(what, " ", "-"))
		var logs bytes.Buffer
		for _, p := range e.procs {
			fmt.Fprintf(&logs, "--- %s\n%s\n", p.Name, p.LogTail(2500))
		}
		t.Fatalf("%s: %v (screenshot %s; page problems %q)\n%s", what, err, shot, b.Problems(), logs.String())
	}
}

const reviewsRetries = `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews-retries, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  policy:
    retries: {attempts: 4, perTryTimeout: 2s}
%s`

const consoleFederation = `apiVersion: v1
kind: Namespace
metadata: {name: meshplane-config}
---
apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: global, namespace: meshplane-config}
spec:
  meshes:
  - {name: istiod-istio-system-east, namespace: istio-system}
  - {name: istiod-istio-system-west, namespace: istio-system}
  federation:
    permissive: {}
---
apiVersion: observability.meshplane.dev/v1
kind: AccessLogPolicy
metadata: {name: errors, namespace: bookinfo}
spec:
  filters:
  - statusCodeMatcher: {value: 500, comparator: GE}
`

// The console, in a real headless Chromium against a real plane: sign-in
// refuses a bad token and admits a good one; the overview shows both
// clusters connected; a TrafficPolicy applied with kubectl appears
// ACCEPTED with its VirtualService in both clusters, and an invalid edit
// INVALID with the field; the graph shows the federation edge; the
// access-log tail shows an entry an agent pushed; a user without RBAC is
// refused the views. Every page is saved as a screenshot, and no page may
// break its Content-Security-Policy or throw.
func TestConsoleInABrowser(t *testing.T) {
	harness.RequireE2E(t)
	e := startConsoleEstate(t)
	b := harness.StartBrowser(t, e.certFile, e.artifacts)

	e.wait(t, b, "the sign-in page", 60*time.Second, chromedp.Navigate(e.url+"/"), chromedp.WaitVisible("#token"))
	b.Screenshot(t, "signin")
	e.wait(t, b, "a bad token refused", 30*time.Second,
		chromedp.SendKeys("#token", "not-a-kubernetes-token"), chromedp.Click("[data-testid=signin-submit]"),
		chromedp.WaitVisible("[data-testid=signin-error]"))
	b.Screenshot(t, "signin-refused")
	// A fresh form: the field is React's, and a cleared DOM value would not
	// clear its state.
	e.wait(t, b, "the sign-in page again", 30*time.Second, chromedp.Reload(), chromedp.WaitVisible("#token"))
	e.signIn(t, b, "console-viewer")
	user, err := chromedp.Run(b.Ctx, chromedp.Text("[data-testid=user]"))
	if err != nil || !strings.Contains(user, "system:serviceaccount:meshplane:console-viewer") {
		t.Fatalf("signed-in user = %q, %v", user, err)
	}

	e.wait(t, b, "both clusters connected on the overview", 120*time.Second,
		chromedp.Navigate(e.url+"/#/overview"),
		chromedp.WaitVisible(`tr[data-testid=cluster-row][data-cluster=east][data-push=connected][data-pull=connected]`),
		chromedp.WaitVisible(`tr[data-testid=cluster-row][data-cluster=west][data-push=connected][data-pull=connected]`))
	b.Screenshot(t, "overview")

	e.kubectlApply(t, fmt.Sprintf(reviewsRetries, ""))
	e.wait(t, b, "the TrafficPolicy ACCEPTED", 90*time.Second,
		chromedp.Navigate(e.url+"/#/policies"),
		chromedp.WaitVisible(`tr[data-testid=policy-row][data-kind=TrafficPolicy][data-name=reviews-retries][data-state=ACCEPTED]`))
	b.Screenshot(t, "policies")
	e.wait(t, b, "the TrafficPolicy's VirtualService in both clusters", 60*time.Second,
		chromedp.Click(`tr[data-testid=policy-row][data-kind=TrafficPolicy][data-name=reviews-retries] a`),
		chromedp.WaitVisible(`[data-testid=policy-object][data-kind=VirtualService][data-cluster=east]`),
		chromedp.WaitVisible(`[data-testid=policy-object][data-kind=VirtualService][data-cluster=west]`))
	b.Screenshot(t, "policy")

	// An invalid edit: the mirror names a Service that does not exist.
	e.kubectlApply(t, fmt.Sprintf(reviewsRetries, "    mirror: {kubeService: {name: nosuch}, percentage: 10}\n"))
	e.wait(t, b, "the invalid edit INVALID", 90*time.Second,
		chromedp.Navigate(e.url+"/#/policies"),
		chromedp.WaitVisible(`tr[data-testid=policy-row][data-kind=TrafficPolicy][data-name=reviews-retries][data-state=INVALID]`))
	errs, err := chromedp.Run(b.Ctx, chromedp.Text(`tr[data-testid=policy-row][data-name=reviews-retries] [data-testid=policy-error]`))
	if err != nil || !strings.Contains(errs, "spec.policy.mirror") {
		t.Fatalf("the invalid policy's errors on the page = %q, %v; want the field spec.policy.mirror named", errs, err)
	}
	b.Screenshot(t, "policy-invalid")
	// The last valid version stays in force: nothing was deleted.
	for _, c := range e.workload {
		if _, err := c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(t.Context(), "reviews", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: the VirtualService reviews after the invalid edit: %v", c.Name, err)
		}
	}

	e.kubectlApply(t, consoleFederation)
	e.wait(t, b, "the federation edge on the graph", 120*time.Second,
		chromedp.Navigate(e.url+"/#/graph"),
		chromedp.WaitReady(`[data-testid=graph][data-ready=true]`),
		chromedp.WaitReady(`tr[data-testid=graph-edge][data-kind=federation]`))
	b.Screenshot(t, "graph")

	e.wait(t, b, "the output page", 60*time.Second,
		chromedp.Navigate(e.url+"/#/output/east"), chromedp.WaitVisible(`pre[data-testid=output-yaml]`))
	yaml, err := chromedp.Run(b.Ctx, chromedp.Text(`pre[data-testid=output-yaml]`))
	if err != nil || !strings.Contains(yaml, "kind: VirtualService") {
		t.Fatalf("east's output on the page holds no VirtualService (%v):\n%.2000s", err, yaml)
	}
	b.Screenshot(t, "output")

	e.wait(t, b, "the destination page", 60*time.Second,
		chromedp.Navigate(e.url+"/#/destinations/east/bookinfo/reviews"), chromedp.WaitVisible(`[data-testid=describe][data-loaded=true]`))
	b.Screenshot(t, "destination")

	e.wait(t, b, "the access-log page", 30*time.Second, chromedp.Navigate(e.url+"/#/accesslogs"), chromedp.WaitReady(`[data-testid=accesslogs]`))
	e.sendAccessLogsUntil(t, b, `tr[data-testid=log-row][data-cluster=east][data-path="/console-e2e"][data-code="503"]`)
	b.Screenshot(t, "accesslogs")

	// A user whom RBAC gives nothing signs in but sees no view.
	e.wait(t, b, "sign out", 30*time.Second, chromedp.Click("[data-testid=signout]"), chromedp.WaitVisible("#token"))
	e.wait(t, b, "a user without RBAC refused the overview", 60*time.Second,
		chromedp.SendKeys("#token", e.token(t, "nobody")), chromedp.Click("[data-testid=signin-submit]"),
		chromedp.WaitVisible("[data-testid=user]"),
		chromedp.Navigate(e.url+"/#/overview"), chromedp.WaitVisible("[data-testid=error]"))
	msg, err := chromedp.Run(b.Ctx, chromedp.Text("[data-testid=error]"))
	if err != nil || !strings.Contains(msg, "kubernetesclusters") {
		t.Fatalf("the refused user's page says %q, %v; want the resource named", msg, err)
	}
	if n, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr[data-testid=cluster-row]").length`)); n != 0 {
		t.Fatalf("a user without RBAC sees %d clusters", n)
	}
	b.Screenshot(t, "refused")

	var broken []string
	for _, p := range b.Problems() {
		// The refused sign-in and the refused views answer 401 and 403 on
		// purpose; the browser logs those responses as errors.
		if strings.Contains(p, "status of 401") || strings.Contains(p, "status of 403") {
			continue
		}
		broken = append(broken, p)
	}
	if len(broken) > 0 {
		t.Fatalf("the pages reported %d problems (CSP violations, exceptions, console errors):\n%s", len(broken), strings.Join(broken, "\n"))
	}
}

// sendAccessLogsUntil plays east's reviews sidecar: it sends a 503 to the
// agent's Access Log Service until the row appears in the tail (the agent
// forwards only once its output carries the AccessLogPolicy).
func (e *consoleEstate) sendAccessLogsUntil(t *testing.T, b *harness.Browser, row string) {
	t.Helper()
	conn, err := grpc.NewClient(e.eastEnvoy, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The node's metadata is what Istio's sidecar sends: the pod's name,
	// namespace and labels, read from east's API server.
	pods, err := e.workload[0].Clientset().CoreV1().Pods(harness.BookinfoNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app=reviews"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("east's reviews pods: %v (%d)", err, len(pods.Items))
	}
	pod := pods.Items[0]
	labels := map[string]any{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	md, err := structpb.NewStruct(map[string]any{"NAME": pod.Name, "NAMESPACE": pod.Namespace, "LABELS": labels})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~10.0.0.1~" + pod.Name + "." + pod.Namespace + "~" + pod.Namespace + ".svc.cluster.local", Metadata: md}
	entry := &accesslogdatav3.HTTPAccessLogEntry{
		CommonProperties: &accesslogdatav3.AccessLogCommon{UpstreamCluster: "outbound|9080||ratings.bookinfo.svc.cluster.local"},
		ProtocolVersion:  accesslogdatav3.HTTPAccessLogEntry_HTTP11,
		Request:          &accesslogdatav3.HTTPRequestProperties{RequestMethod: corev3.RequestMethod_GET, Path: "/console-e2e", Authority: "ratings:9080"},
		Response:         &accesslogdatav3.HTTPResponseProperties{ResponseCode: wrapperspb.UInt32(503)},
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		stream, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(t.Context())
		if err == nil {
			err = stream.Send(&accesslogv3.StreamAccessLogsMessage{
				Identifier: &accesslogv3.StreamAccessLogsMessage_Identifier{Node: node, LogName: "als"},
				LogEntries: &accesslogv3.StreamAccessLogsMessage_HttpLogs{HttpLogs: &accesslogv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: []*accesslogdatav3.HTTPAccessLogEntry{entry}}},
			})
			if err == nil {
				_, err = stream.CloseAndRecv()
			}
		}
		if err != nil {
			t.Logf("send an access log to east's agent: %v", err)
		}
		ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Second)
		err = chromedp.Do(ctx, chromedp.WaitReady(row))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.wait(t, b, "the access log in the tail", time.Millisecond, chromedp.WaitReady(row))
		}
	}
}

// The all-in-one serves the console too (--console-addr), reading its own
// front door, which a supervisor may pass as a socket (--addr fd:3, as
// the harness and the demo do): a signed-in client gets the overview with
// the registered cluster.
func TestAllInOneConsole(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	dir := t.TempDir()
	mgmt := kubetest.Start(t, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	if err := mgmt.ApplyYAML(ctx, append([]byte(consoleRBAC+"---\n"), consoleViewerRole(t)...)); err != nil {
		t.Fatal(err)
	}
	// The plane's PKI, made first so that the console's certificate is
	// signed by the CA the plane then loads.
	p, err := harness.NewPKI(filepath.Join(dir, "pki"), "meshplane.local")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := p.ServiceCert("console")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := harness.Listen()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// The harness passes the all-in-one its own two sockets only: the
	// console's port is bound again by the process.
	ln.Close()
	redis := redistest.Start(t)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east"}, AllInOne: true,
		ManagementKubeconfig: mgmt.Kubeconfig(),
		AllInOneArgs: []string{"--console-addr", addr, "--console-tls-cert-file", cert, "--console-tls-key-file", key,
			"--console-upstream-cert-file", cert, "--console-upstream-key-file", key},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	east := kubetest.Start(t, kubetest.Options{Name: "east"})
	if err := east.ApplyYAML(ctx, harness.Bookinfo("east")); err != nil {
		t.Fatal(err)
	}
	agent, err := plane.StartAgent(harness.AgentOptions{BinDir: binDir, Cluster: "east", Token: tokens["east"], Kubeconfig: east.Kubeconfig(),
		LogDir: filepath.Join(dir, "logs"), StateDir: filepath.Join(dir, "agent-east")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)

	e := &consoleEstate{mgmt: mgmt}
	c, csrf := consoleClient(t, "https://"+addr, p.RootFile(), e.token(t, "console-viewer"))
	var overview string
	err = harness.Wait(ctx, 90*time.Second, "east connected on the all-in-one console's overview", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/api/meshplane.console.v1.ConsoleService/GetOverview", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		res, err := c.Do(req)
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		overview = string(body)
		var got struct {
			Clusters []struct{ Cluster, Push, Pull string }
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &got) != nil {
			return false, nil
		}
		return slices.ContainsFunc(got.Clusters, func(c struct{ Cluster, Push, Pull string }) bool {
			return c.Cluster == "east" && c.Push == "connected" && c.Pull == "connected"
		}), nil
	}, append([]*harness.Process{agent}, plane.Procs...)...)
	if err != nil {
		t.Fatalf("%v; last answer: %s", err, overview)
	}
}

// consoleClient signs in over HTTPS, as the browser does, and returns the
// client holding the session cookie and the CSRF token to send.
func consoleClient(t *testing.T, url, caFile, token string) (*http.Client, string) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(c.CloseIdleConnections)
	var res *http.Response
	if err := harness.Wait(t.Context(), 60*time.Second, "sign-in on "+url, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/auth/login", strings.NewReader(`{"token":"`+token+`"}`))
		req.Header.Set("Content-Type", "application/json")
		var err error
		if res, err = c.Do(req); err != nil {
			return false, nil // not listening yet
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return false, fmt.Errorf("sign-in answered %s", res.Status)
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == "mp_csrf" {
			return c, ck.Value
		}
	}
	t.Fatal("sign-in set no mp_csrf cookie")
	return nil, ""
}
