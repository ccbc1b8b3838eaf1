package domain

import (
	"fmt"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// userObject is a VirtualService or DestinationRule in a cluster that
// Meshplane did not write, with its hosts resolved as Istio resolves them.
type userObject struct {
	ref   string   // "<kind> <namespace>/<name>"
	hosts []string // FQDNs, or wildcards ("*", "*.example.com")
}

// userObjects indexes the users' own Istio objects by cluster and kind.
type userObjects map[[2]string][]userObject

// indexUserObjects reads every input's user Istio objects. An object
// exported to no namespace (exportTo: ["~"]) configures nothing that
// Meshplane's objects, exported everywhere, could meet, and is left out.
func indexUserObjects(inputs map[string]*snapshotv1.InputSnapshot, clusterDomain string) userObjects {
	out := userObjects{}
	for _, cluster := range sortedKeys(inputs) {
		for _, o := range inputs[cluster].GetUserIstioObjects() {
			if o.GetName() == "" || (o.GetKind() != KindVirtualService && o.GetKind() != KindDestinationRule) {
				continue
			}
			if ex := o.GetExportTo(); len(ex) > 0 && !slices.ContainsFunc(ex, func(s string) bool { return s != "~" }) {
				continue
			}
			u := userObject{ref: o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()}
			for _, h := range o.GetHosts() {
				u.hosts = append(u.hosts, resolveShortName(strings.ToLower(h), o.GetNamespace(), clusterDomain))
			}
			k := [2]string{cluster, o.GetKind()}
			out[k] = append(out[k], u)
		}
	}
	return out
}

// resolveShortName resolves a host as Istio does within the namespace of
// the object that names it: a name without a dot is a Service of that
// namespace; anything else (an FQDN, a wildcard) is taken as written.
func resolveShortName(host, namespace, clusterDomain string) string {
	if host == "*" || strings.Contains(host, ".") {
		return host
	}
	return host + "." + namespace + ".svc." + clusterDomain
}

// hostMatches says whether a user's host (resolved) configures host.
func hostMatches(user, host string) bool {
	switch {
	case user == "*":
		return true
	case strings.HasPrefix(user, "*."):
		return strings.HasSuffix(host, user[1:])
	}
	return user == host
}

// conflicts returns the user objects of kind in cluster that configure
// host, as "<kind> <namespace>/<name>", sorted.
func (u userObjects) conflicts(cluster, kind, host string) []string {
	var out []string
	for _, o := range u[[2]string{cluster, kind}] {
		if slices.ContainsFunc(o.hosts, func(h string) bool { return hostMatches(h, host) }) {
			out = append(out, o.ref)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reportConflict records that Meshplane's object of kind for destination d
// meets the users' objects users, on every policy that contributed to it,
// and says whether the object is still written: in REPORT mode it is not,
// and the policies are FAILED for d; with ALLOW_INTERSECTING it is, with a
// warning.
func reportConflict(mode settingsv1.SettingsSpec_UserConfigConflictMode, d *destination, host string, parents []ObjectKey, policy func(ObjectKey) *trafficPolicy, kind string, users []string) bool {
	emit := mode == settingsv1.SettingsSpec_ALLOW_INTERSECTING
	var msg string
	if emit {
		msg = fmt.Sprintf("the %s for host %s is written beside %s, not written by Meshplane, for the same host (Settings userConfigConflictMode: ALLOW_INTERSECTING); Istio decides how they combine", kind, host, strings.Join(users, ", "))
	} else {
		msg = fmt.Sprintf("the %s for host %s is not written: it would conflict with %s, not written by Meshplane, for the same host (Settings userConfigConflictMode: REPORT); remove or narrow the user's config, or allow intersecting config", kind, host, strings.Join(users, ", "))
	}
	for _, key := range uniqueKeys(parents) {
		p := policy(key)
		if p == nil {
			continue
		}
		as := p.Status.GetDestinations()[d.Key.String()]
		if as == nil {
			// A policy that shifts traffic to subsets of d from another
			// destination: the conflict is reported on the policy.
			if emit {
				continue
			}
			if p.conflicts == nil {
				p.conflicts = map[ObjectKey]string{}
			}
			p.conflicts[d.Key] = "destination " + d.Key.String() + ": " + msg
			continue
		}
		if emit {
			as.Warnings = append(as.Warnings, msg)
			continue
		}
		if as.State == commonv1.ApprovalState_ACCEPTED {
			as.State = commonv1.ApprovalState_FAILED
		}
		as.Errors = append(as.Errors, msg)
	}
	return emit
}

func uniqueKeys(keys []ObjectKey) []ObjectKey {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b ObjectKey) int { return a.compare(b) })
	return slices.Compact(out)
}
