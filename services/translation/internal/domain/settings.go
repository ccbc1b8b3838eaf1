package domain

import (
	"cmp"
	"fmt"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// Names of the Settings resource.
const (
	SettingsV1   = "settings.meshplane.dev/v1"
	KindSettings = "Settings"
	// SettingsName is the name of the one Settings object that is read.
	SettingsName = "settings"
)

// settings is what translation takes from the Settings in force.
type settings struct {
	// defaultTLS is the DestinationRule TLS mode of destinations that no
	// TrafficPolicy sets.
	defaultTLS istiov1alpha3.ClientTLSSettings_TLSmode
	conflicts  settingsv1.SettingsSpec_UserConfigConflictMode
}

func defaultSettings() settings {
	return settings{defaultTLS: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL, conflicts: settingsv1.SettingsSpec_REPORT}
}

// settingsObject is one Settings resource found in an input.
type settingsObject struct {
	Key    ObjectKey
	Meta   *commonv1.ObjectMeta
	Spec   *settingsv1.SettingsSpec
	Errors []string
	// lastGood is set when the current version is invalid and the last
	// valid version, now in Spec, is read instead.
	lastGood *Kept[*settingsv1.SettingsSpec]
	// inForce is set on the one Settings that is read.
	inForce bool
	// ignored says why a Settings is not read.
	ignored string
}

// ValidateSettings checks a Settings spec.
func ValidateSettings(spec *settingsv1.SettingsSpec) []string {
	v := &validator{}
	if m := spec.GetMtls(); m != nil {
		mode := m.GetIstio().GetTlsMode()
		if _, ok := networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode_name[int32(mode)]; !ok {
			v.add("spec.mtls.istio.tlsMode", "unknown mode %d", mode)
		}
	}
	if m := spec.GetUserConfigConflictMode(); settingsv1.SettingsSpec_UserConfigConflictMode_name[int32(m)] == "" {
		v.add("spec.userConfigConflictMode", "unknown mode %d", m)
	}
	d := spec.GetDiscovery()
	for i, ns := range d.GetIncludeNamespaces() {
		if ns == "" {
			v.add(fmt.Sprintf("spec.discovery.includeNamespaces[%d]", i), "must not be empty")
		}
	}
	for i, ns := range d.GetExcludeNamespaces() {
		if ns == "" {
			v.add(fmt.Sprintf("spec.discovery.excludeNamespaces[%d]", i), "must not be empty")
		}
	}
	return v.errs
}

// readSettings finds the Settings in force: the one named "settings" in
// the install's namespace (any namespace when opts.Namespace is empty) of
// the management cluster's input. While the management cluster has no
// input of its own, a Settings with that name and namespace in any input
// is read instead: the first by cluster name. Every other Settings is
// reported as ignored. An invalid Settings leaves the defaults in force.
func readSettings(inputs map[string]*snapshotv1.InputSnapshot, opts Options, kept map[ObjectKey]Kept[*settingsv1.SettingsSpec]) (settings, []*settingsObject) {
	var all []*settingsObject
	for _, c := range collectResources(inputs, (*snapshotv1.InputSnapshot).GetSettings) {
		s := &settingsObject{Key: c.Key, Meta: c.Res.GetMetadata(), Spec: c.Res.GetSpec()}
		if s.Spec == nil {
			s.Spec = &settingsv1.SettingsSpec{}
		}
		s.Errors = validateVersion(s.Meta, s.Spec, ValidateSettings)
		s.Spec, s.lastGood = inForce(s.Key, s.Meta, s.Spec, s.Errors, kept)
		all = append(all, s)
	}
	var chosen *settingsObject
	for _, s := range all {
		if s.Key.Name != SettingsName || opts.Namespace != "" && s.Key.Namespace != opts.Namespace {
			continue
		}
		if chosen == nil || rankSettings(s, opts) < rankSettings(chosen, opts) {
			chosen = s
		}
	}
	out := defaultSettings()
	for _, s := range all {
		switch {
		case s == chosen:
			s.inForce = true
		case s.Key.Name != SettingsName:
			s.ignored = fmt.Sprintf("only the Settings named %q is read", SettingsName)
		case opts.Namespace != "" && s.Key.Namespace != opts.Namespace:
			s.ignored = fmt.Sprintf("only the Settings in the install's namespace %q is read", opts.Namespace)
		default:
			s.ignored = fmt.Sprintf("the Settings %s is in force; one Settings is read, from the management cluster %q when it has one", chosen.Key, opts.ManagementCluster)
		}
	}
	if chosen == nil || len(chosen.Errors) > 0 && chosen.lastGood == nil {
		return out, all
	}
	if mode, ok := tlsModes[chosen.Spec.GetMtls().GetIstio().GetTlsMode()]; ok {
		out.defaultTLS = mode
	}
	out.conflicts = chosen.Spec.GetUserConfigConflictMode()
	return out, all
}

// rankSettings orders candidate Settings: the management cluster's first,
// then by cluster, namespace and name.
func rankSettings(s *settingsObject, opts Options) string {
	prefix := "1"
	if s.Key.Cluster == opts.ManagementCluster {
		prefix = "0"
	}
	return prefix + "\x00" + s.Key.Cluster + "\x00" + s.Key.Namespace
}

// settingsStatus is the status written back to a Settings.
func settingsStatus(s *settingsObject) (*snapshotv1.ResourceStatus, error) {
	st := &settingsv1.SettingsStatus{
		ObservedGeneration: s.Meta.GetGeneration(),
		State:              commonv1.ApprovalState_ACCEPTED,
		Errors:             slices.Clone(s.Errors),
	}
	switch {
	case len(s.Errors) > 0 && s.lastGood != nil:
		st.State = commonv1.ApprovalState_INVALID
		st.LastKnownGood = true
		st.Errors = append(st.Errors, lastGoodMessage(s.lastGood.Generation))
	case len(s.Errors) > 0:
		st.State = commonv1.ApprovalState_INVALID
		if s.inForce {
			st.Errors = append(st.Errors, "the default settings are in force until the errors are fixed")
		}
	case !s.inForce:
		st.State = commonv1.ApprovalState_INVALID
		st.Errors = append(st.Errors, cmp.Or(s.ignored, "not read"))
	}
	return resourceStatus(SettingsV1, KindSettings, s.Key, s.Meta.GetGeneration(), st)
}

// goodVersion is the version to keep as the last valid one, if any: a
// valid Settings is good whether or not it is the one read.
func (s *settingsObject) goodVersion() (Kept[*settingsv1.SettingsSpec], bool) {
	if s.lastGood != nil {
		return *s.lastGood, true
	}
	return keptOf(s.Meta, s.Spec), len(s.Errors) == 0
}
