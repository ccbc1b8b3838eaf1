package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

// agentUserAgent is the User-Agent of an agent replica in a Raft group:
// meshplane-agent/<version> (<cluster>/<replica>; term <n>).
var agentUserAgent = regexp.MustCompile(`^meshplane-agent/\S+ \(([^/]+)/([^;]+); term (\d+)\)$`)

// stint is one replica's writes in one Raft term, as the API server's
// audit log records them.
type stint struct {
	replica     string
	term        uint64
	first, last time.Time // first request received, last response sent
	lastStart   time.Time // last request received
	writes      int
}

func (s stint) String() string {
	return fmt.Sprintf("%s in term %d: %d writes from %s to %s", s.replica, s.term, s.writes,
		s.first.Format("15:04:05.000000"), s.last.Format("15:04:05.000000"))
}

// writerStints groups the agent replicas' writes in an audit log by
// replica and term, in the order they began. It also returns the writes
// of an agent whose User-Agent names no term.
func writerStints(events []kubetest.AuditEvent) (stints []stint, untermed int) {
	at := map[string]int{}
	for _, e := range events {
		m := agentUserAgent.FindStringSubmatch(e.UserAgent)
		if m == nil {
			if strings.HasPrefix(e.UserAgent, "meshplane-agent/") {
				untermed++
			}
			continue
		}
		term, _ := strconv.ParseUint(m[3], 10, 64)
		key := m[2] + "/" + m[3]
		i, ok := at[key]
		if !ok {
			i = len(stints)
			at[key] = i
			stints = append(stints, stint{replica: m[2], term: term, first: e.RequestReceived, last: e.Completed, lastStart: e.RequestReceived})
		}
		s := &stints[i]
		s.writes++
		if e.RequestReceived.Before(s.first) {
			s.first = e.RequestReceived
		}
		if e.Completed.After(s.last) {
			s.last = e.Completed
		}
		if e.RequestReceived.After(s.lastStart) {
			s.lastStart = e.RequestReceived
		}
	}
	slices.SortFunc(stints, func(a, b stint) int { return a.first.Compare(b.first) })
	return stints, untermed
}

// overlappingWriters checks I3 on an audit log: no two replicas ever
// write at once. Each stint (a replica's writes in one term) must end
// before the next begins, terms must grow from stint to stint, and every
// write must name its term. It returns what broke it.
func overlappingWriters(events []kubetest.AuditEvent) []string {
	stints, untermed := writerStints(events)
	var out []string
	if untermed > 0 {
		out = append(out, fmt.Sprintf("%d agent writes name no Raft term", untermed))
	}
	for i := 1; i < len(stints); i++ {
		prev, cur := stints[i-1], stints[i]
		if cur.term == 0 {
			out = append(out, fmt.Sprintf("a write in term 0: %s", cur))
		}
		if !cur.first.After(prev.last) {
			out = append(out, fmt.Sprintf("two replicas wrote at once: %s overlaps %s", prev, cur))
		}
		if cur.term <= prev.term {
			out = append(out, fmt.Sprintf("a stale leader wrote: %s after %s", cur, prev))
		}
	}
	return out
}
