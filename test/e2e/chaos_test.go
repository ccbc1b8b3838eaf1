package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
)

// The chaos soak's knobs. CI runs the short default; the long soak is
//
//	MESHPLANE_CHAOS_DURATION=30m MESHPLANE_CHAOS_AGENTS=50 go test -run TestChaos -timeout 60m ./test/e2e/
//
// and MESHPLANE_CHAOS_SEED replays a schedule.
const (
	envChaosDuration = "MESHPLANE_CHAOS_DURATION"
	envChaosAgents   = "MESHPLANE_CHAOS_AGENTS"
	envChaosSeed     = "MESHPLANE_CHAOS_SEED"
)

// chaosSettings are the run's duration, agents and seed.
func chaosSettings(t *testing.T) (time.Duration, int, int64) {
	t.Helper()
	dur, agents, seed := 45*time.Second, 12, time.Now().UnixNano()
	if v := os.Getenv(envChaosDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", envChaosDuration, v, err)
		}
		dur = d
	}
	if v := os.Getenv(envChaosAgents); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envChaosAgents, v)
		}
		agents = n
	}
	if v := os.Getenv(envChaosSeed); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envChaosSeed, v, err)
		}
		seed = n
	}
	return dur, agents, seed
}

// chaos is one soak: the plane, its agents and what they last acked.
type chaos struct {
	t     *testing.T
	d     *redistest.Deployment
	plane *harness.Plane
	f     *fanOut
	gone  *harness.SimAgent
	rng   *rand.Rand
	// proxies stand between the agents and each ingest and distribution
	// replica.
	proxies []*harness.Proxy
	// real are the workload clusters with real API servers and agents;
	// their edits and held follow the simulated agents'.
	real []*realCluster

	mu sync.Mutex
	// last is each simulated agent's newest acked snapshot; held is the
	// edit (its timeout in seconds) that snapshot holds, or, for a real
	// cluster, that its API server holds; edits is the timeout of each
	// cluster's newest accepted edit.
	last  []*snapshotv1.OutputSnapshot
	held  []int
	edits []int
	// convergence holds, per fault, how long after its end every agent
	// held the edits accepted by then, and byKind the same by the fault's
	// kind; slow says, for each fault after which that took more than
	// 10 s, which fault it was and who lagged.
	convergence []time.Duration
	byKind      map[string][]time.Duration
	slow        []string
	// kind and desc are the fault being injected.
	kind, desc string
	// faults counts the faults injected by kind; kills counts each
	// process's scheduled kills, so that any other exit is a violation.
	faults     map[string]int
	violations []string
	log        []string
}

func (c *chaos) violate(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *chaos) record(kind, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[kind]++
	c.kind, c.desc = kind, fmt.Sprintf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	c.log = append(c.log, c.desc)
}

// TestChaos runs the plane (two replicas of each service) on a Sentinel
// Redis with simulated agents, a stream of policy edits, and a seeded
// schedule of faults: service replicas killed and restarted, frozen
// (SIGSTOP) and thawed, the agents' connections to a replica cut or
// delayed (a TCP proxy in front of each ingest and distribution replica),
// and the Redis primary killed so that Sentinel fails over. It checks, throughout and at the end:
//   - I2: within 10 s of the last fault's end, every agent has acked an
//     output that holds its newest edit (no edit lost);
//   - I4: no process panics or exits but those the schedule kills;
//   - I5: the deregistered cluster is never served.
//
// Two of the clusters are real: a kube-apiserver each, with bookinfo and
// a TrafficPolicy that the edits change, and three agent processes in a
// Raft group that reach the plane through the proxies. The faults add
// their Raft leader frozen (SIGSTOP) for 2 to 5 s and their API server
// paused, and the invariants add:
//   - I1: every Meshplane object in a real cluster once it converged is
//     there, with its UID, at every read (every 500 ms) and at the end:
//     the edits never change which objects exist, so none may go;
//   - I3: the API servers' audit logs show no two agent replicas writing
//     at once, and no write from an older Raft term after a newer one.
//
// Its figures end where the user sees them: for a real cluster, when its
// API server serves the edited VirtualService; for a simulated agent,
// when it acks the output (it applies nothing).
func TestChaos(t *testing.T) {
	harness.RequireE2E(t)
	dur, n, seed := chaosSettings(t)
	t.Logf("chaos: seed %d, %d agents, %v of faults; replay with %s=%d", seed, n, dur, envChaosSeed, seed)
	ctx := t.Context()
	c := &chaos{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 0)), faults: map[string]int{}, byKind: map[string][]time.Duration{}}
	c.d = redistest.StartDeployment(t, redistest.Sentinel)
	clusters := make([]string, n)
	for i := range clusters {
		clusters[i] = fmt.Sprintf("c%03d", i)
	}
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: binDir, Dir: testDir(t), RedisAddr: strings.Join(c.d.Addrs(), ","), RedisMasterName: c.d.MasterName(),
		RegistrationRedis: true, RedisWaitReplicas: 1, Clusters: append(slices.Clone(clusters), "gone", "east", "west"), Replicas: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	c.plane = plane
	via := map[string]string{}       // replica address -> its proxy's
	proxied := map[string][]string{} // service -> its replicas' proxies
	for _, svc := range []string{"ingest", "distribution"} {
		for _, addr := range plane.Replicas[svc] {
			px, err := harness.StartProxy(addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(px.Close)
			c.proxies = append(c.proxies, px)
			via[addr] = px.Addr()
			proxied[svc] = append(proxied[svc], px.Addr())
		}
	}
	c.f = &fanOut{plane: plane, procs: plane.Procs, newAgent: func(i int, cluster string) (*harness.SimAgent, error) {
		// Agents spread over the replicas, as behind a Service, each
		// through its replica's proxy.
		at := *plane
		at.Ingest = via[plane.Replicas["ingest"][i%len(plane.Replicas["ingest"])]]
		at.Distribution = via[plane.Replicas["distribution"][i%len(plane.Replicas["distribution"])]]
		return at.NewSimAgent(cluster)
	}}
	c.edits = make([]int, n)
	for i := range c.edits {
		c.edits[i] = 1
	}
	c.startRealClusters([]string{"east", "west"}, tokens, proxied["ingest"], proxied["distribution"])
	c.f.follow(t, clusters, func(cl string) *snapshotv1.InputSnapshot { return ownPolicyInput(cl, time.Second) })
	c.f.awaitAll(t, func(s *snapshotv1.OutputSnapshot) bool { return hasTimeout(s, time.Second) })
	c.last = slices.Clone(c.f.have)
	c.held = make([]int, n)
	for i, s := range c.last {
		c.held[i] = heldEdit(s)
	}
	for _, r := range c.real {
		for _, tr := range r.tracks {
			tr.at = len(c.edits)
			c.edits, c.held = append(c.edits, 1), append(c.held, 0)
		}
		r.await(t, c)
	}

	// A cluster registered and then deregistered: never served again.
	if err := harness.Wait(ctx, 30*time.Second, "cluster gone registering", func(ctx context.Context) (bool, error) {
		c.gone, err = plane.RegisterSimAgent(ctx, "gone", tokens["gone"])
		return err == nil, err
	}, c.f.procs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.gone.Close)
	deregister(t, clusterClient(t, plane), plane)

	// The real clusters are watched until the end: the final
	// convergence reads them too.
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	for _, r := range c.real {
		watching.Go(func() { c.watchRealCluster(watchCtx, r) })
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, a := range c.f.agents {
		wg.Go(func() { c.follow(runCtx, i, a) })
	}
	editRng := rand.New(rand.NewPCG(c.rng.Uint64(), 1))
	wg.Go(func() { c.editLoop(runCtx, editRng) })
	wg.Go(func() { c.revokedLoop(runCtx) })

	end := time.Now().Add(dur)
	var lastFault time.Time
	var measures sync.WaitGroup
	for {
		c.fault(ctx)
		lastFault = time.Now() // the fault has ended: the process or node is back
		target := c.targets()
		c.mu.Lock()
		kind, desc := c.kind, c.desc
		c.mu.Unlock()
		measures.Go(func() { c.measure(ctx, lastFault, target, kind, desc) })
		if !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Duration(500+c.rng.IntN(1500)) * time.Millisecond):
		}
	}
	measures.Wait()
	stop()
	wg.Wait()

	converged := c.converge(ctx, lastFault, 10*time.Second)
	stopWatching()
	watching.Wait()
	c.finalChecks(ctx)
	procs := slices.Clone(plane.Procs)
	for _, r := range c.real {
		procs = append(procs, r.group.Procs()...)
	}
	for _, p := range procs {
		if p.Exited() {
			c.violate("I4: %s exited though the schedule did not kill it (or did not restart it)", p.Name)
		}
		if strings.Contains(p.LogTail(1<<20), "panic:") {
			c.violate("I4: %s panicked:\n%s", p.Name, p.LogTail(3000))
		}
	}
	kinds := make([]string, 0, len(c.faults))
	total := 0
	for k, v := range c.faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
		total += v
	}
	slices.Sort(kinds)
	p50, p99 := percentiles(c.convergence)
	t.Logf("chaos report: seed %d; %d faults (%s); %d violations; convergence after each fault p50 %v, p99 %v, max %v (%d faults over 10 s); after the last fault %v; edits %d, lost %d",
		seed, total, strings.Join(kinds, ", "), len(c.violations), p50, p99, slices.Max(append(c.convergence, 0)).Round(time.Millisecond),
		len(c.slow), converged.Round(time.Millisecond), c.editCount(), c.lost())
	for _, k := range slices.Sorted(maps.Keys(c.byKind)) {
		p50, p99 := percentiles(c.byKind[k])
		t.Logf("chaos report: after %q (%d): p50 %v, p99 %v, max %v", k, len(c.byKind[k]), p50, p99, slices.Max(c.byKind[k]).Round(time.Millisecond))
	}
	for _, s := range c.slow {
		t.Logf("chaos report: slow: %s", s)
	}
	if len(c.violations) > 0 {
		t.Errorf("chaos seed %d: %d invariant violations (replay with %s=%d):\n%s\nschedule:\n%s",
			seed, len(c.violations), envChaosSeed, seed, strings.Join(c.violations, "\n"), strings.Join(c.log, "\n"))
	}
}

// follow keeps the agent's newest acked snapshot; a full channel would
// stop the agent acking.
func (c *chaos) follow(ctx context.Context, i int, a *harness.SimAgent) {
	for {
		select {
		case <-ctx.Done():
			return
		case got := <-a.Acked:
			c.mu.Lock()
			c.last[i], c.held[i] = got.Snapshot, heldEdit(got.Snapshot)
			c.mu.Unlock()
		}
	}
}

// targets are the edits accepted so far, per agent.
func (c *chaos) targets() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.edits)
}

// measure records how long after from every cluster held at least the
// edits in target (edits only grow), by the fault's kind; after 10 s it
// also notes the fault and who lagged. It gives up after two minutes (the
// convergence then counts as two minutes).
func (c *chaos) measure(ctx context.Context, from time.Time, target []int, kind, desc string) {
	ctx, cancel := context.WithDeadline(ctx, from.Add(2*time.Minute))
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lagged []string
	for {
		c.mu.Lock()
		var behind []int
		for i, want := range target {
			if c.held[i] < want {
				behind = append(behind, i)
			}
		}
		took := time.Since(from)
		if len(behind) == 0 || ctx.Err() != nil {
			c.convergence = append(c.convergence, took)
			c.byKind[kind] = append(c.byKind[kind], took)
			if took > 10*time.Second {
				c.slow = append(c.slow, fmt.Sprintf("%v after %s; lagging at 10 s: %s", took.Round(time.Millisecond), desc, strings.Join(lagged, ", ")))
			}
			c.mu.Unlock()
			return
		}
		if lagged == nil && took > 10*time.Second {
			for _, i := range behind {
				lagged = append(lagged, fmt.Sprintf("%s (holds %d, wants %d)", c.clusterName(i), c.held[i], target[i]))
			}
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// clusterName names the cluster of edits[i]: a simulated agent's, or a
// real cluster's policy.
func (c *chaos) clusterName(i int) string {
	if i < len(c.f.agents) {
		return c.f.agents[i].Cluster
	}
	for _, r := range c.real {
		for _, tr := range r.tracks {
			if tr.at == i {
				return r.kube.Name + " " + tr.policy
			}
		}
	}
	return fmt.Sprint(i)
}

// heldEdit is the request timeout, in whole seconds, of the
// VirtualService in s: the edit it holds; 0 for none.
func heldEdit(s *snapshotv1.OutputSnapshot) int {
	const key = `"timeout":"`
	for _, o := range s.GetObjects() {
		if o.GetKind() != "VirtualService" {
			continue
		}
		spec := o.GetSpec()
		i := bytes.Index(spec, []byte(key))
		if i < 0 {
			continue
		}
		rest := spec[i+len(key):]
		j := bytes.IndexByte(rest, 's')
		if j < 0 {
			continue
		}
		if n, err := strconv.Atoi(string(rest[:j])); err == nil {
			return n
		}
	}
	return 0
}

// percentiles returns the median and the 99th percentile of ds.
func percentiles(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Millisecond) }
	return at(0.5), at(0.99)
}

// editLoop edits a random agent's policy every 100 to 400 ms: the edit
// counts once ingest accepted it.
func (c *chaos) editLoop(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		if len(c.real) > 0 && rng.IntN(3) == 0 {
			r := c.real[rng.IntN(len(c.real))]
			c.editRealCluster(ctx, r, r.tracks[rng.IntN(len(r.tracks))])
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
			}
			continue
		}
		i := rng.IntN(len(c.f.agents))
		c.mu.Lock()
		next := c.edits[i] + 1
		c.mu.Unlock()
		a := c.f.agents[i]
		if err := a.Push(ownPolicyInput(a.Cluster, time.Duration(next)*time.Second)); err == nil {
			c.mu.Lock()
			c.edits[i] = next
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
		}
	}
}

// revokedLoop tries the deregistered cluster's certificate throughout.
// Each service learns of the revocation at its next reload of the
// revocation set (--revocation-refresh, 2 s): once ingest has refused it,
// any call served is a violation of I5.
func (c *chaos) revokedLoop(ctx context.Context) {
	refused := false
	deadline := time.Now().Add(10 * time.Second)
	for ctx.Err() == nil {
		err := c.gone.Push(ownPolicyInput("gone", time.Second))
		switch {
		case revokedErr(err):
			refused = true
		case err == nil && refused:
			c.violate("I5: ingest accepted a push from the deregistered cluster at %s", time.Now().Format("15:04:05.000"))
		case !refused && time.Now().After(deadline):
			c.violate("I5: ingest did not refuse the deregistered cluster within 10 s (last: %v)", err)
			refused = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// fault injects one fault from the schedule and waits for its end.
func (c *chaos) fault(ctx context.Context) {
	procs := c.plane.Procs
	p := procs[c.rng.IntN(len(procs))]
	switch k := c.rng.IntN(13); {
	case k >= 10 && len(c.real) > 0:
		if k == 12 {
			c.pauseAPIServer()
		} else {
			c.freezeRaftLeader(ctx)
		}
	case k < 4:
		down := time.Duration(200+c.rng.IntN(1800)) * time.Millisecond
		c.record("kill a service replica", "SIGKILL %s, restarted after %v", p.Name, down)
		err := c.plane.RestartProcess(ctx, p.Name, true, func() error { time.Sleep(down); return nil })
		if err != nil {
			c.violate("restarting %s: %v", p.Name, err)
		}
	case k == 6:
		px := c.proxies[c.rng.IntN(len(c.proxies))]
		cut := time.Duration(1000+c.rng.IntN(2000)) * time.Millisecond
		c.record("cut agents from a replica", "cut every connection through %s for %v", px.Addr(), cut)
		px.Cut(cut)
		time.Sleep(cut)
	case k == 7:
		px := c.proxies[c.rng.IntN(len(c.proxies))]
		delay, lasts := time.Duration(100+c.rng.IntN(400))*time.Millisecond, time.Duration(2000+c.rng.IntN(3000))*time.Millisecond
		c.record("delay agents' traffic", "delay every chunk through %s by %v for %v", px.Addr(), delay, lasts)
		px.Delay(delay)
		time.Sleep(lasts)
		px.Delay(0)
	case k < 6 || k >= 10:
		frozen := time.Duration(2000+c.rng.IntN(3000)) * time.Millisecond
		c.record("freeze a service replica", "SIGSTOP %s for %v", p.Name, frozen)
		c.freeze(p, frozen)
	default:
		primary, err := c.d.Primary(ctx)
		if err != nil {
			c.violate("finding the Redis primary: %v", err)
			return
		}
		down := time.Duration(3000+c.rng.IntN(2000)) * time.Millisecond
		c.record("kill the Redis primary", "SIGKILL the Redis primary %s, back (empty) after %v", primary.Addr(), down)
		primary.Kill()
		time.Sleep(down)
		if err := primary.Restart(ctx); err != nil {
			c.violate("restarting Redis %s: %v", primary.Addr(), err)
			return
		}
		if err := c.d.WaitReady(ctx); err != nil {
			c.violate("Sentinel after the failover: %v", err)
		}
	}
}

// freeze stops p (SIGSTOP) for d, then lets it go on (SIGCONT).
func (c *chaos) freeze(p *harness.Process, d time.Duration) {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		c.violate("freezing %s: %v", p.Name, err)
		return
	}
	time.Sleep(d)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		c.violate("thawing %s: %v", p.Name, err)
	}
}

// converge waits until every agent holds its newest edit, and returns how
// long after the last fault that was; past within, I2 is violated.
func (c *chaos) converge(ctx context.Context, lastFault time.Time, within time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// What the agents ack now arrives on their channels.
		for i, a := range c.f.agents {
			for drained := false; !drained; {
				select {
				case got := <-a.Acked:
					c.mu.Lock()
					c.last[i], c.held[i] = got.Snapshot, heldEdit(got.Snapshot)
					c.mu.Unlock()
				default:
					drained = true
				}
			}
		}
		if c.lost() == 0 {
			took := time.Since(lastFault)
			if took > within {
				c.violate("I2: every agent held its newest edit only %v after the last fault (want within %v)", took.Round(time.Millisecond), within)
			}
			return took
		}
		select {
		case <-ctx.Done():
			c.violate("I2: %d agents never acked an output with their newest edit", c.lost())
			return time.Since(lastFault)
		case <-tick.C:
		}
	}
}

// lost counts the clusters that do not hold their newest edit: in the
// output a simulated agent acked last, or in a real cluster's API server.
func (c *chaos) lost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for i, e := range c.edits {
		if c.held[i] < e {
			n++
		}
	}
	return n
}

func (c *chaos) editCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.edits {
		n += e - 1
	}
	return n
}

// finalChecks runs the end-of-run checks on the real clusters: I1 once
// more, I3 on the audit logs, and that each has acked its newest output
// without apply errors or held deletions.
func (c *chaos) finalChecks(ctx context.Context) {
	for _, r := range c.real {
		objs, err := r.objects(ctx)
		if err != nil {
			c.violate("I1: listing the objects of %s at the end: %v", r.kube.Name, err)
			continue
		}
		c.checkBaseline(r, objs)
	}
	c.checkWriters()
	// What meshctl check reads from distribution (this plane has no
	// front door for meshctl): each real cluster pulling, its newest
	// output acked, without apply errors or held deletions.
	var dists []distributionv1connect.DistributionServiceClient
	for _, addr := range c.plane.Replicas["distribution"] {
		at := *c.plane
		at.Distribution = addr
		dists = append(dists, distributionClient(c.t, &at))
	}
	var last string
	err := harness.Wait(ctx, 30*time.Second, "every real cluster's newest output acked, cleanly", func(ctx context.Context) (bool, error) {
		// Each replica knows its own watchers; the acks are shared.
		connected := map[string]bool{}
		var acks []*distributionv1.ClusterAck
		for _, d := range dists {
			res, err := d.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
			if err != nil {
				last = err.Error()
				return false, nil
			}
			acks = res.Msg.GetClusters()
			for _, a := range acks {
				connected[a.GetCluster()] = connected[a.GetCluster()] || a.GetConnected()
			}
		}
		for _, r := range c.real {
			i := slices.IndexFunc(acks, func(a *distributionv1.ClusterAck) bool { return a.GetCluster() == r.kube.Name })
			if i < 0 {
				last = r.kube.Name + " has no ack"
				return false, nil
			}
			a := acks[i]
			last = a.String()
			if !connected[r.kube.Name] || a.GetAckedVersion() != a.GetLatestVersion() || a.GetApplyErrors() > 0 || a.GetHeldDeletions() > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		c.violate("I2: %v; last: %s", err, last)
	}
}
