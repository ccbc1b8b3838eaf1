package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	multiclusterv1 "github.com/meshplane/meshplane/libs/gen/meshplane/multicluster/v1"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// KubernetesClusters is the mirror's resource.
var KubernetesClusters = schema.GroupVersionResource{Group: "multicluster.meshplane.dev", Version: "v1", Resource: "kubernetesclusters"}

// Mirror writes one KubernetesCluster per cluster record, named after the
// cluster, in one namespace, by server-side apply: spec.clusterName on the
// object, the record on the status subresource.
type Mirror struct {
	client    dynamic.Interface
	namespace string
	install   string
	applied   prometheus.Counter
	errors    *prometheus.CounterVec
}

var _ app.ClusterMirror = (*Mirror)(nil)

// NewMirror mirrors into namespace; its counters are registered on reg
// (nil: not registered).
func NewMirror(client dynamic.Interface, namespace, install string, reg prometheus.Registerer) *Mirror {
	m := &Mirror{
		client: client, namespace: namespace, install: install,
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "meshplane", Subsystem: "registration", Name: "mirror_applies_total",
			Help: "KubernetesCluster mirrors written (server-side apply of object and status).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshplane", Subsystem: "registration", Name: "mirror_errors_total",
			Help: "KubernetesCluster mirror failures, by operation (apply, list, get). They never fail a registration call.",
		}, []string{"operation"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.applied, m.errors} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					continue
				}
				switch existing := are.ExistingCollector.(type) {
				case prometheus.Counter:
					m.applied = existing
				case *prometheus.CounterVec:
					m.errors = existing
				}
			}
		}
	}
	return m
}

var stateToProto = map[domain.Status]multiclusterv1.KubernetesClusterStatus_State{
	domain.StatusPendingApproval: multiclusterv1.KubernetesClusterStatus_STATE_PENDING_APPROVAL,
	domain.StatusApproved:        multiclusterv1.KubernetesClusterStatus_STATE_APPROVED,
	domain.StatusRegistered:      multiclusterv1.KubernetesClusterStatus_STATE_REGISTERED,
	domain.StatusDeregistered:    multiclusterv1.KubernetesClusterStatus_STATE_DEREGISTERED,
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// statusOf renders the record as the CRD's status, through the proto so
// that field names and formats are the CRD's.
func statusOf(c domain.Cluster) (map[string]any, error) {
	st := &multiclusterv1.KubernetesClusterStatus{
		State: stateToProto[c.Status], AgentVersion: c.AgentVersion,
		FirstSeen: ts(c.FirstSeen), LastSeen: ts(c.LastSeen),
	}
	if latest, ok := c.Latest(); ok {
		st.CertificateSerial, st.CertificateExpiresAt = latest.Serial, ts(latest.NotAfter)
	}
	for _, ic := range c.Certs {
		st.Certificates = append(st.Certificates, &multiclusterv1.KubernetesClusterStatus_Certificate{Serial: ic.Serial, ExpiresAt: ts(ic.NotAfter)})
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	return out, json.Unmarshal(b, &out)
}

func (m *Mirror) object(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(KubernetesClusters.GroupVersion().String())
	u.SetKind("KubernetesCluster")
	u.SetName(name)
	u.SetNamespace(m.namespace)
	u.SetLabels(map[string]string{LabelManagedBy: FieldManager, LabelInstall: m.install})
	return u
}

// MirrorCluster applies the object, then its status.
func (m *Mirror) MirrorCluster(ctx context.Context, c domain.Cluster) error {
	if err := m.apply(ctx, c); err != nil {
		m.errors.WithLabelValues("apply").Inc()
		return fmt.Errorf("mirror cluster %s into %s: %w", c.Name, m.namespace, err)
	}
	m.applied.Inc()
	return nil
}

func (m *Mirror) apply(ctx context.Context, c domain.Cluster) error {
	res := m.client.Resource(KubernetesClusters).Namespace(m.namespace)
	obj := m.object(c.Name)
	obj.Object["spec"] = map[string]any{"clusterName": c.Name}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if _, err := res.Apply(ctx, c.Name, obj, opts); err != nil {
		return err
	}
	status, err := statusOf(c)
	if err != nil {
		return err
	}
	st := m.object(c.Name)
	st.Object["status"] = status
	_, err = res.ApplyStatus(ctx, c.Name, st, opts)
	return err
}

var _ app.ClusterArchive = (*Mirror)(nil)

var stateFromProto = func() map[multiclusterv1.KubernetesClusterStatus_State]domain.Status {
	m := map[multiclusterv1.KubernetesClusterStatus_State]domain.Status{}
	for d, p := range stateToProto {
		m[p] = d
	}
	return m
}()

// ArchivedClusters returns the records the install's mirrors hold: only
// objects carrying registration's labels count.
func (m *Mirror) ArchivedClusters(ctx context.Context) ([]domain.Cluster, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: FieldManager, LabelInstall: m.install}).String()
	list, err := m.client.Resource(KubernetesClusters).Namespace(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		m.errors.WithLabelValues("list").Inc()
		return nil, fmt.Errorf("list KubernetesClusters in %s: %w", m.namespace, err)
	}
	out := make([]domain.Cluster, 0, len(list.Items))
	var errs []error
	for i := range list.Items {
		c, err := recordOf(&list.Items[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// ArchivedCluster returns the record the mirror of name holds, or
// app.ErrNotFound.
func (m *Mirror) ArchivedCluster(ctx context.Context, name string) (domain.Cluster, error) {
	u, err := m.client.Resource(KubernetesClusters).Namespace(m.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return domain.Cluster{}, app.ErrNotFound
	}
	if err != nil {
		m.errors.WithLabelValues("get").Inc()
		return domain.Cluster{}, fmt.Errorf("get KubernetesCluster %s/%s: %w", m.namespace, name, err)
	}
	if l := u.GetLabels(); l[LabelManagedBy] != FieldManager || l[LabelInstall] != m.install {
		return domain.Cluster{}, app.ErrNotFound
	}
	return recordOf(u)
}

// recordOf reads the record back from a mirror's status, with every
// certificate it lists (a mirror written before the list holds only the
// newest).
func recordOf(u *unstructured.Unstructured) (domain.Cluster, error) {
	c := domain.Cluster{Name: u.GetName(), CreatedAt: u.GetCreationTimestamp().Time}
	if name, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName"); name != "" && name != c.Name {
		return domain.Cluster{}, fmt.Errorf("KubernetesCluster %s names cluster %q", c.Name, name)
	}
	raw, ok := u.Object["status"]
	if !ok {
		return domain.Cluster{}, fmt.Errorf("KubernetesCluster %s has no status yet", c.Name)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("KubernetesCluster %s status: %w", c.Name, err)
	}
	st := &multiclusterv1.KubernetesClusterStatus{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, st); err != nil {
		return domain.Cluster{}, fmt.Errorf("KubernetesCluster %s status: %w", c.Name, err)
	}
	if c.Status, ok = stateFromProto[st.GetState()]; !ok {
		return domain.Cluster{}, fmt.Errorf("KubernetesCluster %s has status.state %s", c.Name, st.GetState())
	}
	c.AgentVersion = st.GetAgentVersion()
	if st.GetFirstSeen() != nil {
		c.FirstSeen = st.GetFirstSeen().AsTime()
	}
	if st.GetLastSeen() != nil {
		c.LastSeen = st.GetLastSeen().AsTime()
	}
	for _, ic := range st.GetCertificates() {
		if ic.GetSerial() != "" && ic.GetExpiresAt() != nil {
			c.Certs = append(c.Certs, domain.IssuedCert{Serial: ic.GetSerial(), NotAfter: ic.GetExpiresAt().AsTime()})
		}
	}
	if len(c.Certs) == 0 && st.GetCertificateSerial() != "" && st.GetCertificateExpiresAt() != nil {
		c.Certs = []domain.IssuedCert{{Serial: st.GetCertificateSerial(), NotAfter: st.GetCertificateExpiresAt().AsTime()}}
	}
	return c, nil
}
