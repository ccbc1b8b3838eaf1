package meshview

import (
	"maps"
	"slices"
	"strings"
	"time"

	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
)

// CheckInput is what the management services answered. Records and
// Translation are nil when those services could not be asked: their checks
// are then skipped.
type CheckInput struct {
	Clusters    []*ingestv1.ClusterConnectivity
	Acks        []*distributionv1.ClusterAck
	Records     []*registrationv1.Cluster
	Translation *translationv1.GetStatusResponse
	Now         time.Time
}

// SafeMode is translation's: publishing held until every cluster has
// reported.
type SafeMode struct {
	On      bool     `json:"on"`
	Waiting []string `json:"waitingFor,omitempty"`
	// Missing are the expected clusters (registered in the management
	// cluster) that have not reported since translation started: outputs
	// are incomplete, and agents hold their deletions.
	Missing []string `json:"missingClusters,omitempty"`
}

// ClusterCheck is one cluster's connection, versions and errors.
type ClusterCheck struct {
	Cluster       string     `json:"cluster"`
	Push          string     `json:"push"`
	InputVersion  string     `json:"inputVersion,omitempty"`
	LastPush      *time.Time `json:"lastPush,omitempty"`
	Pull          string     `json:"pull"`
	Applied       string     `json:"applied"`
	ApplyErrors   uint32     `json:"applyErrors"`
	HeldDeletions uint32     `json:"heldDeletions"`
	// Registration is the cluster's record status, and CertExpires when
	// its agent's certificate expires.
	Registration string     `json:"registration,omitempty"`
	CertExpires  *time.Time `json:"certExpires,omitempty"`
	// Refused is the agent's last push that ingest refused since it last
	// accepted one: the input in use is older than the cluster.
	Refused *PushRefusal `json:"refused,omitempty"`

	// The facts below are for views that show more than meshctl's table.
	LatestVersion  string `json:"-"`
	AppliedVersion string `json:"-"`
	AgentVersion   string `json:"-"`
	Management     bool   `json:"-"`
	// Stale: not connected, and the last push is older than ingest's stale
	// window.
	Stale bool `json:"-"`
	// Healthy is false when this cluster makes the check fail.
	Healthy bool `json:"-"`
}

// PushRefusal is a push ingest refused.
type PushRefusal struct {
	// Reason is the limit gone over ("destinations", ...), "invalid" or
	// "reserved-cluster".
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// ClusterReport is the per-cluster part of `meshctl check`.
type ClusterReport struct {
	OK       bool
	SafeMode *SafeMode
	Clusters []ClusterCheck
}

// CheckClusters aggregates the services' answers into one row per cluster:
// those ingest knows first (in its order), then those registration or
// translation expect but ingest never heard from, sorted.
func CheckClusters(in CheckInput) ClusterReport {
	rep := ClusterReport{OK: true, Clusters: []ClusterCheck{}}
	byCluster := map[string]*distributionv1.ClusterAck{}
	for _, a := range in.Acks {
		byCluster[a.GetCluster()] = a
	}
	records := map[string]*registrationv1.Cluster{}
	for _, r := range in.Records {
		if r.GetStatus() != registrationv1.ClusterStatus_CLUSTER_STATUS_DEREGISTERED {
			records[r.GetName()] = r
		}
	}
	if st := in.Translation; st != nil {
		rep.SafeMode = &SafeMode{On: st.GetSafeMode(), Waiting: st.GetClustersWaiting(), Missing: st.GetMissingClusters()}
		if rep.SafeMode.On || len(rep.SafeMode.Missing) > 0 {
			rep.OK = false
		}
	}
	seen := map[string]bool{}
	for _, cl := range in.Clusters {
		seen[cl.GetCluster()] = true
		cc := checkCluster(cl, byCluster[cl.GetCluster()], records[cl.GetCluster()], in.Now)
		rep.OK = rep.OK && cc.Healthy
		rep.Clusters = append(rep.Clusters, cc)
	}
	// A cluster registration knows, or translation expects, but ingest
	// never heard from: its agent is not installed or cannot connect.
	never := maps.Clone(records)
	if rep.SafeMode != nil {
		for _, name := range rep.SafeMode.Missing {
			if _, ok := never[name]; !ok {
				never[name] = nil
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(never)) {
		if seen[name] {
			continue
		}
		cc := ClusterCheck{Cluster: name, Push: "never", Pull: "never", Applied: "-"}
		if r := never[name]; r != nil {
			cc.Registration = StatusName(r.GetStatus())
			CertValid(&cc, r, in.Now)
		}
		rep.OK = false
		rep.Clusters = append(rep.Clusters, cc)
	}
	return rep
}

func checkCluster(cl *ingestv1.ClusterConnectivity, a *distributionv1.ClusterAck, r *registrationv1.Cluster, now time.Time) ClusterCheck {
	cc := ClusterCheck{
		Cluster: cl.GetCluster(), Push: "disconnected", Pull: "disconnected", Applied: "-", InputVersion: cl.GetVersion(),
		ApplyErrors: a.GetApplyErrors(), HeldDeletions: a.GetHeldDeletions(), Healthy: true,
		LatestVersion: a.GetLatestVersion(), AppliedVersion: a.GetAckedVersion(), AgentVersion: cl.GetAgentVersion(), Management: cl.GetManagement(),
		Stale: cl.GetStale(),
	}
	if cl.GetConnected() {
		cc.Push = "connected"
	}
	if a.GetConnected() {
		cc.Pull = "connected"
	}
	if a.GetAckedVersion() != "" {
		cc.Applied = "behind"
		if a.GetAckedVersion() == a.GetLatestVersion() {
			cc.Applied = "current"
		}
	}
	if cl.GetLastPush() != nil {
		t := cl.GetLastPush().AsTime().UTC()
		cc.LastPush = &t
	}
	if rf := cl.GetRefused(); rf != nil {
		cc.Push += ", refused"
		cc.Refused = &PushRefusal{Reason: rf.GetReason(), Message: rf.GetMessage(), At: rf.GetRefusedAt().AsTime().UTC()}
		cc.Healthy = false
	}
	if cl.GetManagement() {
		// The management cluster's own resources: read by ingest, pulled
		// by no agent.
		cc.Pull, cc.Applied = "-", "-"
		if !cl.GetConnected() {
			cc.Healthy = false
		}
	} else if !cl.GetConnected() || !a.GetConnected() || cc.Applied != "current" || a.GetApplyErrors() > 0 || a.GetHeldDeletions() > 0 {
		cc.Healthy = false
	}
	if r != nil {
		cc.Registration = StatusName(r.GetStatus())
		if !CertValid(&cc, r, now) {
			cc.Healthy = false
		}
	}
	return cc
}

// CertValid fills the certificate's expiry and says whether it is still
// valid at now.
func CertValid(cc *ClusterCheck, r *registrationv1.Cluster, now time.Time) bool {
	if r.GetCertificateExpiresAt() == nil {
		return true
	}
	t := r.GetCertificateExpiresAt().AsTime().UTC()
	cc.CertExpires = &t
	return now.Before(t)
}

// StatusName is a registration status without its enum prefix
// ("APPROVED").
func StatusName(s registrationv1.ClusterStatus) string {
	return strings.TrimPrefix(s.String(), "CLUSTER_STATUS_")
}
