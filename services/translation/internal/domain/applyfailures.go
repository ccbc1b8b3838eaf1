package domain

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// ApplyFailure is an object of a cluster's output that its agent could not
// apply, as the agent reported it: the object as it was sent, and the API
// server's message.
type ApplyFailure struct {
	Object *snapshotv1.Object
	Error  string
}

// ApplyFailures finds the objects of out that an ack of out's version
// reports REJECTED or CONFLICT, in the order of out's objects. Results
// naming no object of out (a status write, a delete) are not failures of
// an output object and are left out.
func ApplyFailures(out *snapshotv1.OutputSnapshot, results []*snapshotv1.ApplyResult) []ApplyFailure {
	failed := map[refKey]string{}
	for _, r := range results {
		switch r.GetOutcome() {
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT:
			ref := r.GetRef()
			failed[refKey{ref.GetApiVersion(), ref.GetKind(), ref.GetNamespace(), ref.GetName()}] = r.GetError()
		}
	}
	if len(failed) == 0 {
		return nil
	}
	var found []ApplyFailure
	for _, o := range out.GetObjects() {
		if msg, ok := failed[refOf(o)]; ok {
			found = append(found, ApplyFailure{Object: o, Error: msg})
		}
	}
	return found
}

// SameApplyFailures reports whether a and b name the same objects with the
// same messages.
func SameApplyFailures(a, b []ApplyFailure) bool {
	return slices.EqualFunc(a, b, func(x, y ApplyFailure) bool {
		return x.Error == y.Error && proto.Equal(x.Object, y.Object)
	})
}

type refKey struct{ apiVersion, kind, namespace, name string }

func refOf(o *snapshotv1.Object) refKey {
	return refKey{o.GetApiVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}
}

// MarkApplyFailures reports the objects that agents could not apply in the
// statuses of the TrafficPolicies and AccessPolicies they were translated
// from (the parents annotation): the policy is FAILED for the object's
// destination (or as a whole, for an object without one), with the API
// server's message. An INVALID policy stays INVALID and gets the message
// too. A failure counts only while the cluster's output still holds the
// very object that failed: an edit that changes the object clears it at
// once. failures is by cluster. Changed outputs are sealed again; it
// returns the clusters whose outputs changed.
//
// The result depends only on the outputs and the failures, so the same acks
// give the same versions on every replica, and an agent that acks the new
// version with the same failure changes nothing: the loop settles after one
// extra version.
func MarkApplyFailures(outputs map[string]*snapshotv1.OutputSnapshot, failures map[string][]ApplyFailure) ([]string, error) {
	type statusAt struct {
		cluster string
		ref     refKey
	}
	type mark struct{ destination, message string }
	marks := map[statusAt][]mark{}
	for _, cluster := range slices.Sorted(maps.Keys(failures)) {
		out := outputs[cluster]
		if out == nil {
			continue
		}
		current := make(map[refKey]*snapshotv1.Object, len(out.GetObjects()))
		for _, o := range out.GetObjects() {
			current[refOf(o)] = o
		}
		for _, f := range failures[cluster] {
			o := current[refOf(f.Object)]
			if o == nil || !proto.Equal(o, f.Object) {
				continue
			}
			var parents map[string][]ParentRef
			if err := json.Unmarshal([]byte(o.GetAnnotations()[snapshots.AnnotationParents]), &parents); err != nil {
				continue // not an annotation translation wrote
			}
			dest := ""
			if ds := parents[parentKindDestination]; len(ds) > 0 {
				dest = ObjectKey{Cluster: ds[0].Cluster, Namespace: ds[0].Namespace, Name: ds[0].Name}.String()
			}
			msg := fmt.Sprintf("%s %s/%s in cluster %s could not be applied: %s", o.GetKind(), o.GetNamespace(), o.GetName(), cluster, f.Error)
			for kind, policyKind := range map[string]string{parentKindTraffic: KindTrafficPolicy, parentKindAccess: KindAccessPolicy} {
				for _, p := range parents[kind] {
					at := statusAt{p.Cluster, refKey{NetworkingV1, policyKind, p.Namespace, p.Name}}
					marks[at] = append(marks[at], mark{dest, msg})
				}
			}
		}
	}
	changed := map[string]bool{}
	for at, ms := range marks {
		out := outputs[at.cluster]
		if out == nil {
			continue
		}
		for _, st := range out.GetStatuses() {
			if (refKey{st.GetApiVersion(), st.GetKind(), st.GetNamespace(), st.GetName()}) != at.ref {
				continue
			}
			var s commonv1.ResourceStatus
			if err := protojson.Unmarshal(st.GetStatus(), &s); err != nil {
				return nil, fmt.Errorf("status of %s %s/%s in %s: %w", at.ref.kind, at.ref.namespace, at.ref.name, at.cluster, err)
			}
			slices.SortFunc(ms, func(a, b mark) int {
				if a.destination != b.destination {
					return strings.Compare(a.destination, b.destination)
				}
				return strings.Compare(a.message, b.message)
			})
			ms = slices.Compact(ms)
			for _, m := range ms {
				if as := s.GetDestinations()[m.destination]; as != nil {
					if as.State != commonv1.ApprovalState_INVALID {
						as.State = commonv1.ApprovalState_FAILED
					}
					as.Errors = append(as.Errors, m.message)
				}
				if s.State != commonv1.ApprovalState_INVALID {
					s.State = commonv1.ApprovalState_FAILED
				}
				e := m.message
				if m.destination != "" {
					e = "destination " + m.destination + ": " + e
				}
				s.Errors = append(s.Errors, e)
			}
			raw, err := encode.Spec(&s)
			if err != nil {
				return nil, fmt.Errorf("status of %s %s/%s in %s: %w", at.ref.kind, at.ref.namespace, at.ref.name, at.cluster, err)
			}
			st.Status = raw
			changed[at.cluster] = true
		}
	}
	for c := range changed {
		snapshots.SealOutput(outputs[c])
	}
	return slices.Sorted(maps.Keys(changed)), nil
}
