package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/meshplane/meshplane/libs/gen/crds"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminUser is the user name of the admin token (group system:masters).
const AdminUser = "kubetest-admin"

// ServiceClusterIPRange is passed to kube-apiserver as
// --service-cluster-ip-range.
const ServiceClusterIPRange = "10.96.0.0/16"

// DefaultStartTimeout bounds StartCluster when its context has no deadline.
const DefaultStartTimeout = 2 * time.Minute

// Options configures one cluster.
type Options struct {
	// Name names the cluster in logs, file names and the kubeconfig context.
	// Default: "kube1", "kube2", ... in start order.
	Name string
	// CRDs holds extra YAML (or JSON) to install after the Istio CRDs, e.g.
	// Meshplane's own. Each entry may hold several documents separated by
	// "---"; every document must be a CustomResourceDefinition.
	CRDs [][]byte
	// SkipIstioCRDs leaves out the Istio CRDs.
	SkipIstioCRDs bool
	// SkipMeshplaneCRDs leaves out Meshplane's own CRDs (libs/gen/crds).
	SkipMeshplaneCRDs bool
	// LogDir receives <Name>-etcd.log and <Name>-kube-apiserver.log, and
	// keeps them after Stop. Default: the cluster's temporary state
	// directory, which Stop removes.
	LogDir string
	// Audit makes the API server log every write request (verb, object,
	// user, user agent, times, response code) to <LogDir>/<Name>-audit.log;
	// Cluster.AuditEvents reads it.
	Audit bool
}

// Cluster is a running etcd plus kube-apiserver. Stop it when done (Start
// does that for tests).
type Cluster struct {
	// Name is Options.Name or the default name.
	Name string

	stateDir     string
	logDir       string
	etcdLog      string
	apiserverLog string
	auditLog     string
	etcdURL      string
	host         string
	caData       []byte
	adminToken   string
	ca           *clientCA
	kubeconfig   string

	etcd      *process
	apiserver *process

	restConfig *rest.Config
	clientset  kubernetes.Interface
	dynamic    dynamic.Interface
	istio      istioclient.Interface
	mapper     meta.ResettableRESTMapper

	stopOnce sync.Once
}

var clusterSeq atomic.Int64

// maxPortAttempts bounds the retries when a child process cannot bind the
// port picked for it because something else took it first.
const maxPortAttempts = 5

// StartCluster starts etcd and kube-apiserver, waits until the API server is
// ready, installs the Istio CRDs (unless opts.SkipIstioCRDs) and opts.CRDs,
// and waits until every CRD is Established. It does not depend on package
// testing, so demo programs can use it; call Stop when done.
//
// ctx bounds the start only, not the cluster's life. Without a deadline,
// DefaultStartTimeout applies.
func StartCluster(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	name := opts.Name
	if name == "" {
		name = "kube" + strconv.FormatInt(clusterSeq.Add(1), 10)
	}
	etcdBin, err := EtcdPath()
	if err != nil {
		return nil, err
	}
	apiserverBin, err := KubeAPIServerPath()
	if err != nil {
		return nil, err
	}
	// Resolve the CRDs before starting anything: a missing file is cheaper
	// to report now.
	var crdDocs [][]byte
	if !opts.SkipIstioCRDs {
		istio, err := IstioCRDs()
		if err != nil {
			return nil, err
		}
		crdDocs = append(crdDocs, istio)
	}
	if !opts.SkipMeshplaneCRDs {
		own, err := crds.All()
		if err != nil {
			return nil, fmt.Errorf("kubetest: meshplane CRDs: %w", err)
		}
		crdDocs = append(crdDocs, own...)
	}
	crdDocs = append(crdDocs, opts.CRDs...)

	stateDir, err := os.MkdirTemp("", "meshplane-kube-"+safeName(name)+"-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c := &Cluster{Name: name, stateDir: stateDir, logDir: stateDir}
	if opts.LogDir != "" {
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			os.RemoveAll(stateDir)
			return nil, fmt.Errorf("kubetest: log dir: %w", err)
		}
		c.logDir = opts.LogDir
	}
	c.etcdLog = filepath.Join(c.logDir, safeName(name)+"-etcd.log")
	c.apiserverLog = filepath.Join(c.logDir, safeName(name)+"-kube-apiserver.log")
	if opts.Audit {
		c.auditLog = filepath.Join(c.logDir, safeName(name)+"-audit.log")
	}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("kubetest: start cluster %q: %w", name, err)
		}
	}()

	if err := c.startEtcd(ctx, etcdBin); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, apiserverBin); err != nil {
		return nil, err
	}
	if err := c.initClients(ctx); err != nil {
		return nil, err
	}
	if err := c.installCRDs(ctx, crdDocs); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts a cluster for a test and stops it in t.Cleanup. It fails the
// test when a binary is missing, with a message saying how to get it. It
// skips only when MESHPLANE_SKIP_KUBE_TESTS=1.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	skipIfAsked(t)
	c, err := StartCluster(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	registerCleanup(t, c)
	return c
}

// StartMany starts one cluster per Options in parallel, for tests that need
// several (a management cluster and workload clusters). The clusters are
// fully independent: each has its own etcd.
func StartMany(t testing.TB, opts ...Options) []*Cluster {
	t.Helper()
	skipIfAsked(t)
	clusters := make([]*Cluster, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		if o.Name == "" {
			o.Name = "kube" + strconv.FormatInt(clusterSeq.Add(1), 10)
		}
		wg.Go(func() {
			clusters[i], errs[i] = StartCluster(t.Context(), o)
		})
	}
	wg.Wait()
	for _, c := range clusters {
		if c != nil {
			registerCleanup(t, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%v", err)
	}
	return clusters
}

func skipIfAsked(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("%s=1: skipping a test that needs a real kube-apiserver", EnvSkip)
	}
}

func registerCleanup(t testing.TB, c *Cluster) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster %s: kube-apiserver log %s ends with:\n%s", c.Name, c.apiserverLog, fileTail(c.apiserverLog, 20))
			t.Logf("cluster %s: etcd log %s ends with:\n%s", c.Name, c.etcdLog, fileTail(c.etcdLog, 10))
		}
		c.Stop()
	})
}

func (c *Cluster) startEtcd(ctx context.Context, bin string) error {
	dataDir := filepath.Join(c.stateDir, "etcd")
	var err error
	for range maxPortAttempts {
		var ports []int
		ports, err = freePorts(2)
		if err != nil {
			return err
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		// A failed attempt may leave a half-made data dir behind.
		if err = os.RemoveAll(dataDir); err != nil {
			return err
		}
		var p *process
		p, err = startProcess("etcd", c.etcdLog, bin,
			"--name=etcd",
			"--data-dir="+dataDir,
			"--listen-client-urls="+clientURL,
			"--advertise-client-urls="+clientURL,
			"--listen-peer-urls="+peerURL,
			"--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=etcd="+peerURL,
			"--initial-cluster-state=new",
			// One member: a short election timeout makes it leader
			// in tens of milliseconds instead of a second.
			"--heartbeat-interval=10",
			"--election-timeout=100",
			"--logger=zap",
			"--log-level=warn",
		)
		if err != nil {
			return err
		}
		c.etcd = p
		healthURL := clientURL + "/health"
		err = p.waitReady(ctx, func(ctx context.Context) error {
			body, err := httpGet(ctx, http.DefaultClient, healthURL, "")
			if err != nil {
				return err
			}
			if !strings.Contains(body, `"health":"true"`) {
				return fmt.Errorf("etcd health: %s", body)
			}
			return nil
		})
		if err == nil {
			c.etcdURL = clientURL
			return nil
		}
		p.stop(time.Second)
		c.etcd = nil
		if !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", maxPortAttempts, err)
}

func (c *Cluster) startAPIServer(ctx context.Context, bin string) error {
	certDir := filepath.Join(c.stateDir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKeys(c.stateDir)
	if err != nil {
		return fmt.Errorf("service account keys: %w", err)
	}
	c.adminToken = randomToken()
	tokenFile, err := writeTokenFile(c.stateDir, c.adminToken)
	if err != nil {
		return err
	}
	ca, caPEM, err := newClientCA(c.Name)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	c.ca = ca
	clientCAFile := filepath.Join(c.stateDir, "client-ca.crt")
	if err := os.WriteFile(clientCAFile, caPEM, 0o644); err != nil {
		return err
	}

	var extra []string
	if c.auditLog != "" {
		if extra, err = c.auditArgs(); err != nil {
			return fmt.Errorf("audit policy: %w", err)
		}
	}

	insecure := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // only to poll /readyz; clients verify the CA
	}}
	defer insecure.CloseIdleConnections()

	for range maxPortAttempts {
		var ports []int
		ports, err = freePorts(1)
		if err != nil {
			return err
		}
		host := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		var p *process
		p, err = startProcess("kube-apiserver", c.apiserverLog, bin, append([]string{
			"--etcd-servers=" + c.etcdURL,
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// The apiserver would publish its advertise address in
			// the default/kubernetes Endpoints, which rejects
			// loopback addresses. Nothing in the tests needs them.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + certDir,
			"--client-ca-file=" + clientCAFile,
			"--token-auth-file=" + tokenFile,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + saPub,
			"--service-account-signing-key-file=" + saKey,
			"--service-cluster-ip-range=" + ServiceClusterIPRange,
			"--authorization-mode=RBAC",
			// No controller-manager creates the default
			// ServiceAccount, which this plugin requires for Pods.
			"--disable-admission-plugins=ServiceAccount",
			"--allow-privileged=true",
			"--profiling=false",
		}, extra...)...)
		if err != nil {
			return err
		}
		c.apiserver = p
		readyz := host + "/readyz"
		err = p.waitReady(ctx, func(ctx context.Context) error {
			body, err := httpGet(ctx, insecure, readyz, c.adminToken)
			if err != nil {
				return err
			}
			if strings.TrimSpace(body) != "ok" {
				return fmt.Errorf("readyz: %s", body)
			}
			return nil
		})
		if err == nil {
			c.host = host
			return nil
		}
		p.stop(time.Second)
		c.apiserver = nil
		if !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d attempts: %w", maxPortAttempts, err)
}

// httpGet returns the body of a 200 response, and an error otherwise.
func httpGet(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

func (c *Cluster) initClients(ctx context.Context) error {
	// kube-apiserver wrote its self-signed serving certificate, followed by
	// the CA that signed it, into --cert-dir. Trust exactly that.
	ca, err := os.ReadFile(filepath.Join(c.stateDir, "certs", "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("read serving certificate: %w", err)
	}
	c.caData = ca
	c.restConfig = &rest.Config{
		Host:            c.host,
		BearerToken:     c.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		// The client-side rate limiter's defaults (5 QPS) slow tests
		// down for nothing.
		QPS:   1000,
		Burst: 2000,
	}
	if c.clientset, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return err
	}
	if c.dynamic, err = dynamic.NewForConfig(c.restConfig); err != nil {
		return err
	}
	if c.istio, err = istioclient.NewForConfig(c.restConfig); err != nil {
		return err
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.clientset.Discovery()))
	// Check the CA and token with a real request before anyone relies on
	// them.
	if _, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return fmt.Errorf("first request with the serving CA: %w", err)
	}
	return c.writeKubeconfig()
}

func (c *Cluster) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: c.caData}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: c.adminToken}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: AdminUser, Namespace: "default"}
	cfg.CurrentContext = c.Name
	c.kubeconfig = filepath.Join(c.stateDir, "kubeconfig")
	return clientcmd.WriteToFile(*cfg, c.kubeconfig)
}

// RESTConfig returns a copy of the admin config (bearer token in group
// system:masters, the API server's own serving CA).
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Kubeconfig returns the path of a kubeconfig file for the admin, usable by
// kubectl. Its context is named after the cluster. Stop removes it.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Host returns the API server's URL, https://127.0.0.1:<port>.
func (c *Cluster) Host() string { return c.host }

// CAData returns the PEM of the API server's serving certificate and CA.
func (c *Cluster) CAData() []byte { return append([]byte(nil), c.caData...) }

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Dynamic returns an admin dynamic client.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// Istio returns an admin clientset for the Istio APIs (istio.io/client-go).
func (c *Cluster) Istio() istioclient.Interface { return c.istio }

// Mapper returns the cluster's discovery-backed REST mapper. ApplyYAML
// resets it when it meets a kind it does not know yet.
func (c *Cluster) Mapper() meta.ResettableRESTMapper { return c.mapper }

// ApplyYAML server-side applies multi-document YAML to the cluster as the
// admin. See the package function ApplyYAML.
func (c *Cluster) ApplyYAML(ctx context.Context, yaml []byte) error {
	return ApplyYAML(ctx, c.dynamic, c.mapper, yaml)
}

// ConfigFor returns a config that authenticates as user in groups with a
// client certificate signed by a CA the API server trusts
// (--client-ca-file). RBAC decides what it may do: the harness grants
// nothing, so bind roles first. Groups "system:masters" gives full access.
func (c *Cluster) ConfigFor(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := c.ca.issue(user, groups)
	if err != nil {
		return nil, fmt.Errorf("kubetest: client certificate for %s: %w", user, err)
	}
	return &rest.Config{
		Host: c.host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.caData,
			CertData: certPEM,
			KeyData:  keyPEM,
		},
		QPS:   c.restConfig.QPS,
		Burst: c.restConfig.Burst,
	}, nil
}

// EtcdURL returns the client URL of the cluster's etcd.
func (c *Cluster) EtcdURL() string { return c.etcdURL }

// PIDs returns the process IDs of etcd and kube-apiserver, for a
// benchmark to read the CPU time they used from /proc.
func (c *Cluster) PIDs() (etcd, apiserver int) {
	return c.etcd.cmd.Process.Pid, c.apiserver.cmd.Process.Pid
}

// LogFiles returns the paths of the etcd and kube-apiserver logs. They are
// removed by Stop unless Options.LogDir was set.
func (c *Cluster) LogFiles() (etcd, apiserver string) { return c.etcdLog, c.apiserverLog }

// Stop kills kube-apiserver (SIGKILL to its process group) and etcd (SIGTERM,
// then SIGKILL after 5s), and removes the state directory. It is safe to call more than
// once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		// kube-apiserver's graceful shutdown takes over a second and
		// protects nothing here: its state is in etcd, which goes too.
		c.apiserver.stop(0)
		c.etcd.stop(5 * time.Second)
		if c.stateDir != "" {
			_ = os.RemoveAll(c.stateDir)
		}
	})
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func safeName(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if s == "" {
		return "cluster"
	}
	return s
}
