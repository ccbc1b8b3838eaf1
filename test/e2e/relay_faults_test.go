package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// faultPlane is a management plane of separate processes, with two
// distribution replicas. A process can be stopped or killed and started
// again on the same address, as a restarted pod behind a Service would be,
// so that an agent keeps its addresses. While a process is down its
// address refuses connections, as a dead pod's would: the test closes its
// copy of the listener, and binds the same address again on restart. (Kept
// open, the socket would accept connections that nobody serves, and the
// agent would wait out its 30 s handshake timeout on each.)
type faultPlane struct {
	t      *testing.T
	pki    *harness.PKI
	dir    string
	redis  string
	tokens string
	lns    map[string][2]*net.TCPListener // rpc, admin; absent while down
	addrs  map[string][2]string
	procs  map[string]*harness.Process
	agents []*harness.Process
	// certs holds each service's certificate and key files, issued once:
	// the two distribution replicas share theirs.
	certs map[string][2]string
	// extraArgs are added to a service's flags when it (re)starts.
	extraArgs map[string][]string
}

var faultServices = []string{"registration", "translation", "ingest", "distribution-1", "distribution-2"}

func startFaultPlane(t *testing.T, dir, redisAddr string, clusters ...string) (*faultPlane, map[string]string) {
	t.Helper()
	p := &faultPlane{t: t, dir: dir, redis: redisAddr, tokens: filepath.Join(dir, "tokens"),
		lns: map[string][2]*net.TCPListener{}, addrs: map[string][2]string{}, certs: map[string][2]string{}, procs: map[string]*harness.Process{}}
	var err error
	if p.pki, err = harness.NewPKI(filepath.Join(dir, "pki"), "meshplane.local"); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	var b strings.Builder
	for _, c := range clusters {
		tokens[c] = "token-" + c + "-e2e-faults"
		fmt.Fprintf(&b, "%s %s\n", c, tokens[c])
	}
	if err := os.WriteFile(p.tokens, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range faultServices {
		rpc, err := harness.Listen()
		if err != nil {
			t.Fatal(err)
		}
		admin, err := harness.Listen()
		if err != nil {
			t.Fatal(err)
		}
		p.lns[name] = [2]*net.TCPListener{rpc, admin}
		p.addrs[name] = [2]string{rpc.Addr().String(), admin.Addr().String()}
		t.Cleanup(func() { rpc.Close(); admin.Close() })
	}
	t.Cleanup(p.stopAll)
	for _, name := range faultServices {
		p.start(name)
	}
	return p, tokens
}

func (p *faultPlane) addr(name string) string  { return p.addrs[name][0] }
func (p *faultPlane) admin(name string) string { return p.addrs[name][1] }

// down stops (or kills) the named process and closes its sockets.
func (p *faultPlane) down(name string, kill bool) {
	if kill {
		p.procs[name].Kill()
	} else {
		p.procs[name].Stop()
	}
	for _, ln := range p.lns[name] {
		ln.Close()
	}
	delete(p.lns, name)
}

// relisten binds the named process's addresses again. Another socket may
// briefly hold a port (an outgoing connection's), so it retries.
func (p *faultPlane) relisten(name string) {
	p.t.Helper()
	var lns [2]*net.TCPListener
	for i, addr := range p.addrs[name] {
		err := harness.Wait(p.t.Context(), 10*time.Second, "bind "+addr, func(context.Context) (bool, error) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return false, err
			}
			lns[i] = ln.(*net.TCPListener)
			return true, nil
		})
		if err != nil {
			p.t.Fatal(err)
		}
		p.t.Cleanup(func() { lns[i].Close() })
	}
	p.lns[name] = lns
}

// start starts the named service on its sockets.
func (p *faultPlane) start(name string) {
	p.t.Helper()
	svc, _, _ := strings.Cut(name, "-")
	if _, ok := p.certs[svc]; !ok {
		cert, key, err := p.pki.ServiceCert(svc)
		if err != nil {
			p.t.Fatal(err)
		}
		p.certs[svc] = [2]string{cert, key}
	}
	cert, key := p.certs[svc][0], p.certs[svc][1]
	args := []string{"--addr", "fd:3", "--admin-addr", "fd:4", "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-client-ca-file", p.pki.RootFile(), "--trust-domain", p.pki.TrustDomain}
	redis := []string{"--redis-addrs", p.redis}
	var pkg string
	switch svc {
	case "registration":
		pkg = harness.CmdRegistration
		args = append(args, "--tls-client-auth", "optional", "--ca-dir", p.pki.CADir, "--bootstrap-tokens-file", p.tokens)
	case "translation":
		pkg = harness.CmdTranslation
		args = append(append(args, redis...), "--debounce", "50ms")
	case "distribution":
		pkg = harness.CmdDistribution
		args = append(args, redis...)
	case "ingest":
		pkg = harness.CmdIngest
		args = append(append(args, redis...), "--translation-addr", p.addr("translation"), "--translation-ca-file", p.pki.RootFile(),
			"--translation-cert-file", cert, "--translation-key-file", key, "--translation-server-name", "localhost")
	}
	args = append(args, p.extraArgs[svc]...)
	if _, ok := p.lns[name]; !ok {
		p.relisten(name)
	}
	ln := p.lns[name]
	proc, err := harness.Start(harness.Spec{Name: name, Binary: harness.Binary(binDir, pkg), Args: args,
		LogDir: filepath.Join(p.dir, "logs"), Listeners: []*net.TCPListener{ln[0], ln[1]}})
	if err != nil {
		p.t.Fatal(err)
	}
	p.procs[name] = proc
}

func (p *faultPlane) stopAll() {
	for _, a := range p.agents {
		a.Stop()
	}
	for _, proc := range p.procs {
		proc.Stop()
	}
}

// running returns the processes that should be alive, for harness.Wait.
func (p *faultPlane) running(except ...string) []*harness.Process {
	var out []*harness.Process
	for name, proc := range p.procs {
		if !contains(except, name) {
			out = append(out, proc)
		}
	}
	return append(out, p.agents...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// startAgent starts the cluster's agent with both distribution replicas,
// distribution-1 first, and returns it with its admin address.
func (p *faultPlane) startAgent(c *kubetest.Cluster, token string) (*harness.Process, string) {
	p.t.Helper()
	stateDir := filepath.Join(p.dir, "agent-"+c.Name)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		p.t.Fatal(err)
	}
	tokenFile := filepath.Join(stateDir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		p.t.Fatal(err)
	}
	admin, err := harness.Listen()
	if err != nil {
		p.t.Fatal(err)
	}
	defer admin.Close()
	proc, err := harness.Start(harness.Spec{
		Name: "agent-" + c.Name, Binary: harness.Binary(binDir, harness.CmdAgent), LogDir: filepath.Join(p.dir, "logs"),
		Args: []string{
			"--cluster", c.Name, "--kubeconfig", c.Kubeconfig(),
			"--registration-addr", p.addr("registration"), "--ingest-addr", p.addr("ingest"),
			"--distribution-addr", p.addr("distribution-1") + "," + p.addr("distribution-2"),
			"--relay-ca-file", p.pki.RootFile(), "--server-name", "localhost", "--trust-domain", p.pki.TrustDomain,
			"--token-file", tokenFile, "--state-dir", stateDir, "--admin-addr", "fd:3", "--debounce", "50ms",
			"--envoy-addr", "127.0.0.1:0",
		},
		Listeners: []*net.TCPListener{admin},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.agents = append(p.agents, proc)
	return proc, admin.Addr().String()
}

// metric returns one sample from a /metrics page, or "" when absent.
func metric(ctx context.Context, admin, sample string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return v, nil
		}
	}
	return "", sc.Err()
}

func waitMetric(t *testing.T, ctx context.Context, admin, sample, want string, procs []*harness.Process) {
	t.Helper()
	err := harness.Wait(ctx, 60*time.Second, fmt.Sprintf("%s = %s on %s", sample, want, admin), func(ctx context.Context) (bool, error) {
		got, err := metric(ctx, admin, sample)
		return got == want, fmt.Errorf("%s = %q (%v)", sample, got, err)
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
}

// resourceVersions returns name -> resourceVersion of the bookinfo
// DestinationRules in c.
func resourceVersions(t *testing.T, ctx context.Context, c *kubetest.Cluster) map[string]string {
	t.Helper()
	list, err := c.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		out[u.GetName()] = u.GetResourceVersion()
	}
	return out
}

func sameVersions(t *testing.T, what string, before, after map[string]string, except ...string) {
	t.Helper()
	for name, rv := range before {
		if contains(except, name) {
			continue
		}
		if after[name] != rv {
			t.Errorf("%s: DestinationRule %s resourceVersion %s -> %q", what, name, rv, after[name])
		}
	}
}

// waitGone waits until the named bookinfo DestinationRule is gone from c.
func waitGone(t *testing.T, ctx context.Context, c *kubetest.Cluster, name string, procs []*harness.Process) {
	t.Helper()
	err := harness.Wait(ctx, 60*time.Second, fmt.Sprintf("DestinationRule %s to disappear from %s", name, c.Name), func(ctx context.Context) (bool, error) {
		_, err := c.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
}

// testDir is the directory for a test's process logs and state: a
// temporary one, or, with E2E_KEEP_DIR set, one under it that outlives the
// run for a look afterwards.
func testDir(tb testing.TB) string {
	if keep := os.Getenv("E2E_KEEP_DIR"); keep != "" {
		return filepath.Join(keep, tb.Name())
	}
	return tb.TempDir()
}

// setup starts Redis, the plane and east's agent with bookinfo, and waits
// until every bookinfo DestinationRule is applied and acknowledged.
func setupFaults(t *testing.T) (context.Context, *faultPlane, *kubetest.Cluster, string) {
	ctx, p, east, agentAdmin, _ := setupFaultsRedis(t)
	return ctx, p, east, agentAdmin
}

// setupFaultsRedis is setupFaults that also returns the Redis server.
func setupFaultsRedis(t *testing.T) (context.Context, *faultPlane, *kubetest.Cluster, string, *redistest.Server) {
	harness.RequireE2E(t)
	ctx := t.Context()
	east := kubetest.Start(t, kubetest.Options{Name: "east"})
	redis := redistest.Start(t)
	dir := testDir(t)
	p, tokens := startFaultPlane(t, dir, redis.Addr(), "east")
	if err := east.ApplyYAML(ctx, harness.Bookinfo(east.Name)); err != nil {
		t.Fatal(err)
	}
	_, agentAdmin := p.startAgent(east, tokens["east"])
	for _, svc := range harness.BookinfoServices {
		waitDR(t, ctx, east, svc, p.running())
	}
	// The agent watches through distribution-1, the first address.
	waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_pull_clients_connected{cluster="east"}`, "1", p.running())
	// Acknowledged: the agent is done with the version.
	waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", p.running())
	waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_apply_errors{cluster="east"}`, "0", p.running())
	return ctx, p, east, agentAdmin, redis
}

// A distribution replica killed mid-stream: the agent moves to the other
// replica, nothing is re-applied, and new versions flow again.
func TestDistributionReplicaKilled(t *testing.T) {
	ctx, p, east, agentAdmin := setupFaults(t)
	before := resourceVersions(t, ctx, east)
	applied, err := metric(ctx, agentAdmin, `meshplane_agent_objects_total{outcome="applied"}`)
	if err != nil || applied == "" {
		t.Fatalf("agent applied-objects counter: %q, %v", applied, err)
	}
	// Both replicas read the acks from Redis.
	waitMetric(t, ctx, p.admin("distribution-2"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", p.running())

	p.down("distribution-1", true)
	alive := p.running("distribution-1")
	waitMetric(t, ctx, p.admin("distribution-2"), `meshplane_distribution_pull_clients_connected{cluster="east"}`, "1", alive)
	waitMetric(t, ctx, agentAdmin, `meshplane_agent_connected{stream="watch"}`, "1", alive)

	if got, _ := metric(ctx, agentAdmin, `meshplane_agent_objects_total{outcome="applied"}`); got != applied {
		t.Errorf("objects applied went %s -> %s across the failover, want nothing re-applied", applied, got)
	}
	sameVersions(t, "after the failover", before, resourceVersions(t, ctx, east))

	// A new version flows through the other replica.
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = harness.Wait(ctx, 60*time.Second, "ratings DestinationRule to disappear through distribution-2", func(ctx context.Context) (bool, error) {
		_, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, alive...)
	if err != nil {
		t.Fatal(err)
	}
	sameVersions(t, "after a new version", before, resourceVersions(t, ctx, east), "ratings")
	waitMetric(t, ctx, p.admin("distribution-2"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", alive)
}

// A management plane stopped for a while: the cluster's objects all stay,
// also across an agent restart, and after the plane restarts they
// converge.
func TestManagementPlaneStopped(t *testing.T) {
	ctx, p, east, agentAdmin := setupFaults(t)
	before := resourceVersions(t, ctx, east)

	for _, name := range faultServices {
		p.down(name, false)
	}
	agents := p.agents
	waitMetric(t, ctx, agentAdmin, `meshplane_agent_connected{stream="watch"}`, "0", agents)
	// While the plane is down a Service goes away; the agent, which has no
	// new snapshot, deletes nothing.
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The agent retries for a while: several reconnects in its log.
	err := harness.Wait(ctx, 30*time.Second, "the agent to retry the watch", func(context.Context) (bool, error) {
		b, err := os.ReadFile(agents[0].LogPath)
		return strings.Count(string(b), "watch stream ended; reconnecting") >= 3, err
	}, agents...)
	if err != nil {
		t.Fatal(err)
	}
	sameVersions(t, "with the plane down", before, resourceVersions(t, ctx, east))

	// An agent restart with the plane down deletes nothing either. Both
	// agents write to one log file.
	reconnects := func() (int, error) {
		b, err := os.ReadFile(agents[0].LogPath)
		return strings.Count(string(b), "watch stream ended; reconnecting"), err
	}
	agents[0].Stop()
	n, err := reconnects()
	if err != nil {
		t.Fatal(err)
	}
	p.agents = nil
	agent, agentAdmin := p.startAgent(east, "no-token-needed")
	err = harness.Wait(ctx, 30*time.Second, "the restarted agent to retry the watch", func(context.Context) (bool, error) {
		got, err := reconnects()
		return got >= n+2, err
	}, agent)
	if err != nil {
		t.Fatal(err)
	}
	sameVersions(t, "after an agent restart with the plane down", before, resourceVersions(t, ctx, east))

	for _, name := range faultServices {
		p.start(name)
	}
	err = harness.Wait(ctx, 90*time.Second, "ratings DestinationRule to go after the plane restarted", func(ctx context.Context) (bool, error) {
		_, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}
	waitMetric(t, ctx, agentAdmin, `meshplane_agent_apply_errors`, "0", p.running())
	sameVersions(t, "after the plane restarted", before, resourceVersions(t, ctx, east), "ratings")
}
