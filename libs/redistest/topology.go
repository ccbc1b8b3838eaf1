package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology is the shape of a Redis deployment that the services accept.
type Topology string

// The topologies: one server; a primary with two replicas watched by three
// sentinels; a Redis Cluster of three primaries with a replica each.
const (
	Standalone Topology = "standalone"
	Sentinel   Topology = "sentinel"
	Cluster    Topology = "cluster"
)

// Topologies lists every topology, in the order ForEachTopology runs them.
var Topologies = []Topology{Standalone, Sentinel, Cluster}

// MasterName is the name under which the sentinels of a Sentinel
// deployment monitor its primary.
const MasterName = "meshplane"

// Sentinel timings: a primary is down after a second without an answer,
// so that failover tests take seconds, not the default 30.
const (
	sentinelDownAfter       = "1000"
	sentinelFailoverTimeout = "5000"
	clusterNodeTimeout      = "1000"
)

// Deployment is a running Redis deployment of one Topology, every process
// a Server on loopback.
type Deployment struct {
	Topology Topology
	// Nodes are the data servers. Standalone: one. Sentinel: the first
	// primary, then its replicas. Cluster: the six nodes, in the order
	// given to redis-cli --cluster create (the first three were made
	// primaries); roles change with failovers, see Primaries.
	Nodes []*Server
	// Sentinels are the Sentinel deployment's sentinels.
	Sentinels []*Server
	// busPorts are the cluster bus ports, reserved like the servers'
	// (Redis would otherwise take port+10000, which nothing reserves).
	busPorts []*portLock
}

// StartDeployment starts a deployment of the topology for the test and
// closes it when the test ends, logging its servers' log tails if the test
// failed. Like Start, it fails the test when redis-server (or, for
// Cluster, redis-cli) is missing, and skips only when
// MESHPLANE_SKIP_REDIS_TESTS=1.
func StartDeployment(t testing.TB, topology Topology) *Deployment {
	t.Helper()
	if os.Getenv(EnvSkipTests) == "1" {
		t.Skipf("redistest: %s=1, skipping test that needs redis-server", EnvSkipTests)
	}
	d, err := NewDeployment(t.Context(), topology, t.TempDir())
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range d.servers() {
				t.Logf("redistest: %s %s log tail (%s):\n%s", topology, s.Addr(), s.LogPath(), s.LogTail())
			}
		}
		d.Close()
	})
	return d
}

// ForEachTopology runs f as a subtest on a new deployment of each
// topology: the contract suites run on all three.
func ForEachTopology(t *testing.T, f func(t *testing.T, d *Deployment)) {
	t.Helper()
	for _, topology := range Topologies {
		t.Run(string(topology), func(t *testing.T) {
			f(t, StartDeployment(t, topology))
		})
	}
}

// NewDeployment starts a deployment of the topology with its servers'
// directories under dir, and waits until a client can use it. Call Close
// when done.
func NewDeployment(ctx context.Context, topology Topology, dir string) (*Deployment, error) {
	d := &Deployment{Topology: topology}
	var err error
	switch topology {
	case Standalone:
		err = d.startNodes(ctx, dir, 1, nil)
	case Sentinel:
		err = d.startSentinel(ctx, dir)
	case Cluster:
		err = d.startCluster(ctx, dir)
	default:
		return nil, fmt.Errorf("redistest: unknown topology %q (want one of %v)", topology, Topologies)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("redistest: start %s deployment: %w", topology, err)
	}
	return d, nil
}

func (d *Deployment) startNodes(ctx context.Context, dir string, n int, args func(i int) []string) error {
	for i := range n {
		// A replica's first sync starts at once, not after the default
		// five seconds' wait for more replicas.
		o := Options{Dir: filepath.Join(dir, "node"+strconv.Itoa(i)), Args: []string{"--repl-diskless-sync-delay", "0"}}
		if args != nil {
			o.Args = append(o.Args, args(i)...)
		}
		s, err := StartServer(ctx, o)
		if err != nil {
			return err
		}
		d.Nodes = append(d.Nodes, s)
	}
	return nil
}

func (d *Deployment) startSentinel(ctx context.Context, dir string) error {
	var primary string
	err := d.startNodes(ctx, dir, 3, func(i int) []string {
		if i == 0 {
			return nil
		}
		return []string{"--replicaof", "127.0.0.1", strconv.Itoa(d.Nodes[0].Port())}
	})
	if err != nil {
		return err
	}
	primary = strconv.Itoa(d.Nodes[0].Port())
	for i := range 3 {
		s, err := StartServer(ctx, Options{
			Dir:        filepath.Join(dir, "sentinel"+strconv.Itoa(i)),
			ConfigFile: "sentinel.conf",
			Args: []string{
				"--sentinel", "monitor", MasterName, "127.0.0.1", primary, "2",
				"--sentinel", "down-after-milliseconds", MasterName, sentinelDownAfter,
				"--sentinel", "failover-timeout", MasterName, sentinelFailoverTimeout,
			},
		})
		if err != nil {
			return err
		}
		d.Sentinels = append(d.Sentinels, s)
	}
	return d.WaitReady(ctx)
}

func (d *Deployment) startCluster(ctx context.Context, dir string) error {
	cli, err := findCLI()
	if err != nil {
		return err
	}
	bus := make([]int, 6)
	for i := range bus {
		port, lock, err := reservePort()
		if err != nil {
			return err
		}
		bus[i] = port
		d.busPorts = append(d.busPorts, lock)
	}
	err = d.startNodes(ctx, dir, 6, func(i int) []string {
		return []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", clusterNodeTimeout,
			"--cluster-port", strconv.Itoa(bus[i]),
		}
	})
	if err != nil {
		return err
	}
	args := []string{"--cluster", "create"}
	for _, s := range d.Nodes {
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", cli, strings.Join(args, " "), err, out)
	}
	return d.WaitReady(ctx)
}

// findCLI finds redis-cli next to redis-server, or in PATH.
func findCLI() (string, error) {
	server, err := findBinary("")
	if err != nil {
		return "", err
	}
	if p := filepath.Join(filepath.Dir(server), "redis-cli"); isExecutable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("redis-cli"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: redis-cli not found next to %s or in PATH; %s", ErrNotInstalled, server, InstallHelp)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Addrs are the addresses a service is given: the server's; the
// sentinels'; every cluster node's.
func (d *Deployment) Addrs() []string {
	servers := d.Nodes
	if d.Topology == Sentinel {
		servers = d.Sentinels
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// MasterName is the Sentinel master name, empty for the other topologies.
func (d *Deployment) MasterName() string {
	if d.Topology == Sentinel {
		return MasterName
	}
	return ""
}

// Options are go-redis options for this deployment; UniversalClient picks
// the client kind from them. Cluster sets IsClusterMode, so that one
// address would do.
func (d *Deployment) Options() *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:         d.Addrs(),
		MasterName:    d.MasterName(),
		IsClusterMode: d.Topology == Cluster,
	}
}

// NewClient returns a new client for the deployment. The caller closes it.
func (d *Deployment) NewClient() redis.UniversalClient {
	return redis.NewUniversalClient(d.Options())
}

// Client returns a new client that is closed when the test ends.
func (d *Deployment) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := d.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Primary returns the node that is the primary now: the standalone server,
// the one the sentinels name, or an error for Cluster (see Primaries).
func (d *Deployment) Primary(ctx context.Context) (*Server, error) {
	switch d.Topology {
	case Standalone:
		return d.Nodes[0], nil
	case Sentinel:
		addr, err := d.sentinelPrimary(ctx)
		if err != nil {
			return nil, err
		}
		return d.node(addr)
	default:
		return nil, fmt.Errorf("redistest: a %s deployment has several primaries: use Primaries", d.Topology)
	}
}

// Primaries returns the running nodes that hold the primary role now.
func (d *Deployment) Primaries(ctx context.Context) ([]*Server, error) {
	var out []*Server
	for _, s := range d.Nodes {
		if !s.Running() {
			continue
		}
		role, err := s.role(ctx)
		if err != nil {
			return nil, err
		}
		if role == "master" {
			out = append(out, s)
		}
	}
	return out, nil
}

func (d *Deployment) node(addr string) (*Server, error) {
	for _, s := range d.Nodes {
		if s.Addr() == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: %s is none of the deployment's nodes", addr)
}

// sentinelPrimary asks the running sentinels for the primary's address;
// the first answer wins.
func (d *Deployment) sentinelPrimary(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range d.Sentinels {
		if !s.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		addr, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		_ = c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1], nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %v", s.Addr(), err))
	}
	return "", fmt.Errorf("redistest: no sentinel names a primary: %w", errors.Join(errs...))
}

// WaitReady waits until the deployment is whole: for Sentinel, the
// primary's replicas are in sync and every running sentinel knows the
// primary, both replicas and the other sentinels (so that a failover can
// reach its quorum); for Cluster, every running node reports the cluster
// ok with all slots served. After a failover, it waits for the new shape.
func (d *Deployment) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b := newBackoff()
	for {
		err := d.Ready(ctx)
		if err == nil {
			return nil
		}
		if werr := b.wait(ctx, nil); werr != nil {
			return fmt.Errorf("redistest: %s deployment not ready: %w (last: %v)", d.Topology, werr, err)
		}
	}
}

// Ready checks once what WaitReady waits for.
func (d *Deployment) Ready(ctx context.Context) error {
	switch d.Topology {
	case Sentinel:
		return d.sentinelReady(ctx)
	case Cluster:
		return d.clusterReady(ctx)
	}
	return nil
}

func (d *Deployment) sentinelReady(ctx context.Context) error {
	primary, err := d.Primary(ctx)
	if err != nil {
		return err
	}
	info, err := primary.info(ctx, "replication")
	if err != nil {
		return err
	}
	if info["role"] != "master" {
		return fmt.Errorf("%s: role %s, not yet the primary", primary.Addr(), info["role"])
	}
	running := 0
	for _, s := range d.Nodes {
		if s != primary && s.Running() {
			running++
		}
	}
	synced := 0
	for i := 0; ; i++ {
		v, ok := info["slave"+strconv.Itoa(i)]
		if !ok {
			break
		}
		if strings.Contains(v, "state=online") {
			synced++
		}
	}
	if synced < running {
		return fmt.Errorf("%s: %d of %d replicas online", primary.Addr(), synced, running)
	}
	for _, s := range d.Sentinels {
		if !s.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		replicas, rerr := c.Replicas(ctx, MasterName).Result()
		sentinels, serr := c.Sentinels(ctx, MasterName).Result()
		_ = c.Close()
		if err := errors.Join(rerr, serr); err != nil {
			return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
		}
		if len(replicas) < len(d.Nodes)-1 || len(sentinels) < len(d.Sentinels)-1 {
			return fmt.Errorf("sentinel %s knows %d replicas and %d other sentinels", s.Addr(), len(replicas), len(sentinels))
		}
	}
	return nil
}

func (d *Deployment) clusterReady(ctx context.Context) error {
	for _, s := range d.Nodes {
		if !s.Running() {
			continue
		}
		c := s.newAdminClient()
		info, err := c.ClusterInfo(ctx).Result()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr(), err)
		}
		fields := parseInfo(info)
		if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" {
			return fmt.Errorf("%s: cluster_state %s, %s slots ok", s.Addr(), fields["cluster_state"], fields["cluster_slots_ok"])
		}
		// A replica that never synced cannot take over.
		repl, err := s.info(ctx, "replication")
		if err != nil {
			return err
		}
		if repl["role"] == "slave" && repl["master_link_status"] != "up" {
			return fmt.Errorf("%s: a replica not in sync (link %s)", s.Addr(), repl["master_link_status"])
		}
	}
	return nil
}

// FlushAll deletes every key on every primary.
func (d *Deployment) FlushAll(ctx context.Context) error {
	primaries, err := d.Primaries(ctx)
	if err != nil {
		return err
	}
	for _, s := range primaries {
		if err := s.FlushAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every server. It is idempotent.
func (d *Deployment) Close() {
	for _, s := range slices.Backward(d.servers()) {
		_ = s.Close()
	}
	for _, l := range d.busPorts {
		l.release()
	}
}

func (d *Deployment) servers() []*Server {
	return append(slices.Clone(d.Nodes), d.Sentinels...)
}

// role is the server's replication role: master or slave.
func (s *Server) role(ctx context.Context) (string, error) {
	info, err := s.info(ctx, "replication")
	if err != nil {
		return "", err
	}
	return info["role"], nil
}

func (s *Server) info(ctx context.Context, section string) (map[string]string, error) {
	c := s.newAdminClient()
	defer c.Close()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: INFO %s on %s: %w", section, s.addr, err)
	}
	return parseInfo(info), nil
}

// parseInfo reads INFO and CLUSTER INFO replies: key:value lines.
func parseInfo(info string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}
