package domain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
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
	// discovery is the spec.discovery in force, whose gateway detection
	// each cluster's output carries (see GatewayDetector).
	discovery *settingsv1.SettingsSpec_DiscoverySettings
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
	validateGatewayDetector(v, "spec.discovery", &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
		IngressGatewayLabels: d.GetIngressGatewayLabels(), EastWestGatewayLabels: d.GetEastWestGatewayLabels(),
		EastWestGatewayTlsPortName: d.GetEastWestGatewayTlsPortName(),
	})
	for _, cluster := range slices.Sorted(maps.Keys(d.GetGatewayDetectors())) {
		at := fmt.Sprintf("spec.discovery.gatewayDetectors[%q]", cluster)
		if cluster == "" {
			v.add(at, "the cluster name must not be empty (%q is the default for every cluster)", DefaultDetector)
		}
		validateGatewayDetector(v, at, d.GetGatewayDetectors()[cluster])
	}
	return v.errs
}

// DefaultDetector is the key of spec.discovery.gatewayDetectors that
// holds the detector of every cluster without its own.
const DefaultDetector = "*"

// validateGatewayDetector checks gateway labels as Kubernetes checks pod
// labels, and the TLS port name as it checks a Service port's name (a DNS
// label): a detector no pod or port can match would find no gateway, and
// the cluster's federation would stop without a word.
func validateGatewayDetector(v *validator, at string, d *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector) {
	// In a fixed order: the errors are part of the status, which is part
	// of the output's content hash.
	for _, f := range []struct {
		field  string
		labels map[string]string
	}{{"ingressGatewayLabels", d.GetIngressGatewayLabels()}, {"eastWestGatewayLabels", d.GetEastWestGatewayLabels()}} {
		field, labels := f.field, f.labels
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			path := fmt.Sprintf("%s.%s[%q]", at, field, k)
			if msg := labelKeyError(k); msg != "" {
				v.add(path, "invalid label key: %s", msg)
			}
			if msg := labelValueError(labels[k]); msg != "" {
				v.add(path, "invalid label value %q: %s", labels[k], msg)
			}
		}
	}
	if name := d.GetEastWestGatewayTlsPortName(); name != "" && !isDNSLabel(name) {
		v.add(at+".eastWestGatewayTlsPortName", "%q is not a valid Service port name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
}

// labelKeyError says why k is not a Kubernetes label key: an optional
// DNS subdomain prefix and "/", then a name of at most 63 letters, digits,
// '-', '_' and '.', starting and ending with a letter or digit.
func labelKeyError(k string) string {
	name := k
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" || len(prefix) > 253 || !isDNSSubdomain(prefix) {
			return fmt.Sprintf("the prefix of %q must be a DNS subdomain", k)
		}
	}
	if name == "" || len(name) > 63 || !isLabelName(name) {
		return fmt.Sprintf("the name of %q must be at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", k)
	}
	return ""
}

func labelValueError(v string) string {
	if v == "" {
		return ""
	}
	if len(v) > 63 || !isLabelName(v) {
		return "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	}
	return ""
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isLabelName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func isDNSSubdomain(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if !isDNSLabel(part) {
			return false
		}
	}
	return true
}

// GatewayDetector resolves the gateway detection of cluster from a
// Settings' spec.discovery: each field from the cluster's own entry of
// gatewayDetectors, else from the "*" entry, else from the global
// fields. It returns nil when none of them sets anything, which leaves
// the agent's flags in force. The result shares nothing with d.
func GatewayDetector(d *settingsv1.SettingsSpec_DiscoverySettings, cluster string) *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector {
	levels := []*settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
		d.GetGatewayDetectors()[cluster],
		d.GetGatewayDetectors()[DefaultDetector],
		{
			IngressGatewayLabels: d.GetIngressGatewayLabels(), EastWestGatewayLabels: d.GetEastWestGatewayLabels(),
			EastWestGatewayTlsPortName: d.GetEastWestGatewayTlsPortName(),
		},
	}
	out := &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{}
	for _, l := range levels {
		if out.IngressGatewayLabels == nil && len(l.GetIngressGatewayLabels()) > 0 {
			out.IngressGatewayLabels = maps.Clone(l.GetIngressGatewayLabels())
		}
		if out.EastWestGatewayLabels == nil && len(l.GetEastWestGatewayLabels()) > 0 {
			out.EastWestGatewayLabels = maps.Clone(l.GetEastWestGatewayLabels())
		}
		if out.EastWestGatewayTlsPortName == "" {
			out.EastWestGatewayTlsPortName = l.GetEastWestGatewayTlsPortName()
		}
	}
	if out.IngressGatewayLabels == nil && out.EastWestGatewayLabels == nil && out.EastWestGatewayTlsPortName == "" {
		return nil
	}
	return out
}

// readSettings finds the Settings in force: the one named "settings" in
// the install's namespace (any namespace when opts.Namespace is empty) of
// the management cluster's input. While the management cluster has no
// input of its own, a Settings with that name and namespace in any input
// is read instead: the first by cluster name. Every other Settings is
// reported as ignored. An invalid Settings leaves the defaults in force.
func readSettings(inputs map[string]*snapshotv1.InputSnapshot, opts Options, kept map[ObjectKey]Kept[*settingsv1.SettingsSpec], scope *scopes) (settings, []*settingsObject) {
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
		if s.Key.Name != SettingsName || opts.Namespace != "" && s.Key.Namespace != opts.Namespace || !scope.global(s.Key.Cluster) {
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
		case !scope.global(s.Key.Cluster):
			s.ignored = fmt.Sprintf("a Settings changes every cluster: one read from workload cluster %q is read only when a ScopeGrant in the management cluster %q grants that cluster every cluster and namespace", s.Key.Cluster, scope.management)
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
	out.discovery = chosen.Spec.GetDiscovery()
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
func settingsStatus(enc encode.Encoder, s *settingsObject) (*snapshotv1.ResourceStatus, error) {
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
	return resourceStatus(enc, SettingsV1, KindSettings, s.Key, s.Meta.GetGeneration(), st)
}

// goodVersion is the version to keep as the last valid one, if any: a
// valid Settings is good whether or not it is the one read.
func (s *settingsObject) goodVersion() (Kept[*settingsv1.SettingsSpec], bool) {
	if s.lastGood != nil {
		return *s.lastGood, true
	}
	return keptOf(s.Meta, s.Spec), len(s.Errors) == 0
}
