package domain

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/types/known/wrapperspb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// Names used by VirtualDestination translation.
const (
	KindVirtualDestination       = "VirtualDestination"
	parentKindVirtualDestination = NetworkingV1 + ", Kind=" + KindVirtualDestination
	// VirtualDestinationGatewayName names the Gateway that lets an
	// east-west gateway pass VirtualDestination hostnames through to the
	// backing services of its cluster.
	VirtualDestinationGatewayName = "virtual-destinations"
	// LabelFailoverRankPrefix starts the endpoint labels that put the
	// backing destinations of a static failover list in order (see
	// staticFailoverPriority).
	LabelFailoverRankPrefix = "failover.meshplane.dev/rank-"
)

// vdProtocols maps the protocols a VirtualDestination port may name to
// Istio's.
var vdProtocols = map[string]string{"http": "HTTP", "http2": "HTTP2", "grpc": "GRPC", "tcp": "TCP", "tls": "TLS"}

// virtualDestination is a VirtualDestination with what translation learns
// about it.
type virtualDestination struct {
	Key  ObjectKey
	Meta *commonv1.ObjectMeta
	Spec *networkingv1.VirtualDestinationSpec
	// Errors of the spec in force make it INVALID: nothing is translated.
	Errors []string
	// lastGood is set when the current version is invalid (rejected says
	// why) and the last valid version, now in Spec, is translated instead.
	lastGood *Kept[*networkingv1.VirtualDestinationSpec]
	// keptOnly is the last valid version when neither it nor the current
	// version can be in force now: it is kept, not translated.
	keptOnly *Kept[*networkingv1.VirtualDestinationSpec]
	rejected []string
	// denied are the meshes and backing services left out because they are
	// outside the scope of the cluster it was read from.
	denied []string
	// Per target mesh, keyed by "<name>.<namespace>".
	Meshes map[string]*commonv1.ApprovalStatus
	// The meshes that get the hostname, sorted by key.
	targets []*mesh
	// The backing destinations: in failover order for a static list, by
	// key for locality failover.
	backing []vdBacking
}

type vdBacking struct {
	dst  *destination
	port uint32 // the service port traffic goes to
}

// virtualDestinations is every VirtualDestination in acceptance order.
type virtualDestinations struct {
	all   []*virtualDestination
	byRef map[[2]string][]*virtualDestination // (namespace, name), in acceptance order
}

// lookup finds the VirtualDestination a reference names: the one in
// cluster when there is one, else the first accepted.
func (v *virtualDestinations) lookup(namespace, name, cluster string) *virtualDestination {
	found := v.byRef[[2]string{namespace, name}]
	for _, vd := range found {
		if vd.Key.Cluster == cluster {
			return vd
		}
	}
	if len(found) > 0 {
		return found[0]
	}
	return nil
}

func (vd *virtualDestination) valid() bool { return len(vd.Errors) == 0 }

// serves says whether the VirtualDestination's hostname is written into
// mesh m.
func (vd *virtualDestination) serves(m ObjectKey) bool {
	return slices.ContainsFunc(vd.targets, func(t *mesh) bool { return t.Key == m })
}

// ValidateVirtualDestination checks what can be checked of a
// VirtualDestination without looking at the estate.
func ValidateVirtualDestination(spec *networkingv1.VirtualDestinationSpec) []string {
	v := &validator{}
	switch h := spec.GetHostname(); {
	case h == "":
		v.add("spec.hostname", "is required")
	case !dnsLabels.MatchString(h) || len(h) > 253:
		v.add("spec.hostname", "%q is not a DNS name (lower case, no wildcard)", h)
	}
	p := spec.GetPort()
	switch {
	case p == nil:
		v.add("spec.port", "is required")
	default:
		if p.GetNumber() == 0 || p.GetNumber() > 65535 {
			v.add("spec.port.number", "must be between 1 and 65535")
		}
		if _, ok := vdProtocols[strings.ToLower(p.GetProtocol())]; !ok {
			v.add("spec.port.protocol", "%q is not one of http, http2, grpc, tcp, tls", p.GetProtocol())
		}
		if t, ok := p.GetTargetPort().(*networkingv1.VirtualDestinationSpec_Port_TargetNumber); ok && (t.TargetNumber == 0 || t.TargetNumber > 65535) {
			v.add("spec.port.targetNumber", "must be between 1 and 65535")
		}
		if t, ok := p.GetTargetPort().(*networkingv1.VirtualDestinationSpec_Port_TargetName); ok && t.TargetName == "" {
			v.add("spec.port.targetName", "must not be empty")
		}
	}
	switch {
	case spec.GetVirtualMesh() != nil:
		if spec.GetVirtualMesh().GetName() == "" {
			v.add("spec.virtualMesh.name", "is required")
		}
	case spec.GetMeshList() != nil:
		if len(spec.GetMeshList().GetMeshes()) == 0 {
			v.add("spec.meshList.meshes", "must not be empty")
		}
		for i, m := range spec.GetMeshList().GetMeshes() {
			if m.GetName() == "" || m.GetNamespace() == "" {
				v.add(fmt.Sprintf("spec.meshList.meshes[%d]", i), "name and namespace are required")
			}
		}
	default:
		v.add("spec", "one of virtualMesh or meshList is required")
	}
	switch {
	case spec.GetStatic() != nil:
		ds := spec.GetStatic().GetDestinations()
		if len(ds) == 0 {
			v.add("spec.static.destinations", "must not be empty")
		}
		for i, d := range ds {
			switch {
			case d.GetKubeService() == nil:
				v.add(fmt.Sprintf("spec.static.destinations[%d].kubeService", i), "is required")
			case d.GetKubeService().GetName() == "":
				v.add(fmt.Sprintf("spec.static.destinations[%d].kubeService.name", i), "is required")
			}
		}
	case spec.GetLocalized() != nil:
		l := spec.GetLocalized()
		if len(l.GetDestinationSelectors()) == 0 {
			v.add("spec.localized.destinationSelectors", "must not be empty")
		}
		for i, sel := range l.GetDestinationSelectors() {
			for j, ref := range sel.GetKubeServiceRefs().GetServices() {
				if ref.GetName() == "" {
					v.add(fmt.Sprintf("spec.localized.destinationSelectors[%d].kubeServiceRefs.services[%d].name", i, j), "is required")
				}
			}
		}
		from := map[string]int{}
		for i, d := range l.GetFailoverDirectives() {
			dp := fmt.Sprintf("spec.localized.failoverDirectives[%d]", i)
			checkRegionOnly(v, dp+".from", d.GetFrom())
			if r := d.GetFrom().GetRegion(); r != "" {
				if j, dup := from[r]; dup {
					v.add(dp+".from.region", "region %q already has a directive at spec.localized.failoverDirectives[%d]", r, j)
				}
				from[r] = i
			}
			// Istio's localityLbSetting fails a region over to one other
			// region; beyond it, every other region is equally far.
			if len(d.GetTo()) != 1 {
				v.add(dp+".to", "must name exactly one locality: Istio fails a region over to one region, then to all others alike")
			}
			for j, to := range d.GetTo() {
				checkRegionOnly(v, fmt.Sprintf("%s.to[%d]", dp, j), to)
				if to.GetRegion() != "" && to.GetRegion() == d.GetFrom().GetRegion() {
					v.add(fmt.Sprintf("%s.to[%d].region", dp, j), "must differ from the from region")
				}
			}
		}
		if o := l.GetOutlierDetection(); o != nil {
			validateOutlierDetection(v, "spec.localized.outlierDetection", o)
		}
	default:
		v.add("spec", "one of static or localized is required")
	}
	return v.errs
}

// checkRegionOnly checks a failover locality: Istio's failover works
// between regions only; zones within a region are preferred by nearness
// without being named.
func checkRegionOnly(v *validator, path string, l *networkingv1.VirtualDestinationSpec_LocalityConfig_Locality) {
	if l.GetRegion() == "" {
		v.add(path+".region", "is required")
	}
	if l.GetZone() != "" || l.GetSubZone() != "" {
		v.add(path, "zone and subZone cannot be named: Istio fails over between regions, and prefers the nearest zone by itself")
	}
}

// applyVirtualDestinations validates the VirtualDestinations in acceptance
// order and resolves their meshes and backing destinations. A hostname
// belongs to the first one accepted. One whose current version fails keeps
// its last valid version in kept in force.
func applyVirtualDestinations(ix *Index, vms *virtualMeshes, list []collected[*networkingv1.VirtualDestination], kept map[ObjectKey]Kept[*networkingv1.VirtualDestinationSpec]) *virtualDestinations {
	out := &virtualDestinations{byRef: map[[2]string][]*virtualDestination{}}
	hosts := map[string]*virtualDestination{}
	for _, c := range list {
		vd := &virtualDestination{Key: c.Key, Meta: c.Res.GetMetadata(), Spec: c.Res.GetSpec(), Meshes: map[string]*commonv1.ApprovalStatus{}}
		if vd.Spec == nil {
			vd.Spec = &networkingv1.VirtualDestinationSpec{}
		}
		out.all = append(out.all, vd)
		rk := [2]string{vd.Key.Namespace, vd.Key.Name}
		out.byRef[rk] = append(out.byRef[rk], vd)
		vd.Errors = validateVersion(vd.Meta, vd.Spec, ValidateVirtualDestination)
		if len(vd.Errors) == 0 {
			vd.resolve(ix, vms, hosts)
		}
		if good, ok := lastOf(kept, vd.Key, vd.Meta); ok && len(vd.Errors) > 0 {
			held := &virtualDestination{Key: vd.Key, Meta: vd.Meta, Spec: good.Spec, Meshes: vd.Meshes}
			if held.Errors = ValidateVirtualDestination(good.Spec); len(held.Errors) == 0 {
				held.resolve(ix, vms, hosts)
			}
			if len(held.Errors) == 0 {
				rejected := vd.Errors
				*vd = *held
				vd.lastGood, vd.rejected = &good, rejected
			} else {
				// Not in force now (it does not resolve either, say the
				// input of a cluster it names is missing), but still the
				// last valid version: kept for when it resolves again.
				vd.keptOnly = &good
			}
		}
		if len(vd.Errors) > 0 {
			continue
		}
		hosts[vd.Spec.GetHostname()] = vd
		for _, m := range vd.targets {
			vd.Meshes[m.RefKey()] = &commonv1.ApprovalStatus{State: commonv1.ApprovalState_ACCEPTED}
		}
	}
	// Acceptance order per mesh, for the meshes' statuses.
	order := map[ObjectKey]uint32{}
	for _, vd := range out.all {
		for _, m := range vd.targets {
			vd.Meshes[m.RefKey()].AcceptanceOrder = order[m.Key]
			order[m.Key]++
		}
	}
	return out
}

// resolve checks a valid spec against the estate: its hostname must be
// free, and its meshes and backing destinations must resolve. Errors are
// added to vd.Errors; with any, vd has no targets and no backing.
func (vd *virtualDestination) resolve(ix *Index, vms *virtualMeshes, hosts map[string]*virtualDestination) {
	if owner := hosts[vd.Spec.GetHostname()]; owner != nil {
		vd.Errors = append(vd.Errors, fmt.Sprintf("spec.hostname: %q is the hostname of VirtualDestination %s, accepted earlier", vd.Spec.GetHostname(), owner.Key))
		return
	}
	vd.resolveTargets(ix, vms)
	vd.resolveBacking(ix, len(vd.Errors) == 0)
	if len(vd.Errors) > 0 {
		vd.targets, vd.backing = nil, nil
	}
}

// inScope says whether the VirtualDestination may use what is in namespace
// of cluster, and records why not.
func (vd *virtualDestination) inScope(ix *Index, path, what, cluster, namespace string) bool {
	if ix.scope.allows(vd.Key.Cluster, cluster, namespace) {
		return true
	}
	vd.denied = append(vd.denied, ix.scope.outOfScope(path, what, vd.Key.Cluster, cluster, namespace))
	return false
}

// goodVersion is the version to keep as the last valid one, if any.
func (vd *virtualDestination) goodVersion() (Kept[*networkingv1.VirtualDestinationSpec], bool) {
	if vd.lastGood != nil {
		return *vd.lastGood, true
	}
	if vd.keptOnly != nil {
		return *vd.keptOnly, true
	}
	return keptOf(vd.Meta, vd.Spec), vd.valid()
}

// resolveTargets finds the meshes that get the hostname.
func (vd *virtualDestination) resolveTargets(ix *Index, vms *virtualMeshes) {
	if ref := vd.Spec.GetVirtualMesh(); ref != nil {
		ns := cmp.Or(ref.GetNamespace(), vd.Key.Namespace)
		var vm *virtualMesh
		for _, c := range vms.all {
			if c.Key.Namespace == ns && c.Key.Name == ref.GetName() && (vm == nil || c.Key.Cluster == vd.Key.Cluster) {
				vm = c
			}
		}
		switch {
		case vm == nil:
			vd.Errors = append(vd.Errors, fmt.Sprintf("spec.virtualMesh: VirtualMesh %s/%s not found", ns, ref.GetName()))
		case len(vm.Errors) > 0:
			vd.Errors = append(vd.Errors, fmt.Sprintf("spec.virtualMesh: VirtualMesh %s is INVALID", vm.Key))
		case len(vm.Members) == 0:
			vd.Errors = append(vd.Errors, fmt.Sprintf("spec.virtualMesh: VirtualMesh %s holds no mesh", vm.Key))
		default:
			for _, m := range vm.Members {
				if vd.inScope(ix, "spec.virtualMesh", "mesh "+m.RefKey(), m.Key.Cluster, m.Namespace) {
					vd.targets = append(vd.targets, m)
				}
			}
		}
		return
	}
	for i, ref := range vd.Spec.GetMeshList().GetMeshes() {
		key := ref.GetName() + "." + ref.GetNamespace()
		switch found := ix.meshesByRef[[2]string{ref.GetNamespace(), ref.GetName()}]; len(found) {
		case 0:
			vd.Errors = append(vd.Errors, fmt.Sprintf("spec.meshList.meshes[%d]: mesh %s not found in any cluster", i, key))
		case 1:
			if !vd.inScope(ix, fmt.Sprintf("spec.meshList.meshes[%d]", i), "mesh "+key, found[0].Key.Cluster, found[0].Namespace) {
				continue
			}
			if !slices.Contains(vd.targets, found[0]) {
				vd.targets = append(vd.targets, found[0])
			}
		default:
			vd.Errors = append(vd.Errors, fmt.Sprintf("spec.meshList.meshes[%d]: mesh %s is reported by several clusters; it cannot be told apart", i, key))
		}
	}
	slices.SortFunc(vd.targets, func(a, b *mesh) int { return a.Key.compare(b.Key) })
}

// resolveBacking finds the backing destinations and the port of each that
// traffic goes to. checkMesh is false when the meshes could not be
// resolved: each backing destination's mesh is then not checked.
func (vd *virtualDestination) resolveBacking(ix *Index, checkMesh bool) {
	type found struct {
		path string
		dst  *destination
	}
	var list []found
	if s := vd.Spec.GetStatic(); s != nil {
		seen := map[ObjectKey]int{}
		for i, bd := range s.GetDestinations() {
			path := fmt.Sprintf("spec.static.destinations[%d].kubeService", i)
			key := resolveRef(bd.GetKubeService(), vd.Key)
			d, ok := ix.destination(key)
			if !ok {
				vd.Errors = append(vd.Errors, fmt.Sprintf("%s: service %s not found", path, key))
				continue
			}
			if j, dup := seen[key]; dup {
				vd.Errors = append(vd.Errors, fmt.Sprintf("%s: service %s is already listed at spec.static.destinations[%d]", path, key, j))
				continue
			}
			seen[key] = i
			list = append(list, found{path, d})
		}
	} else {
		for _, d := range ix.selectDestinations(vd.Spec.GetLocalized().GetDestinationSelectors(), vd.Key) {
			list = append(list, found{"spec.localized.destinationSelectors", d})
		}
		if len(list) == 0 {
			vd.Errors = append(vd.Errors, "spec.localized.destinationSelectors: no destination matches")
		}
	}
	p := vd.Spec.GetPort()
	for _, f := range list {
		d := f.dst
		if !vd.inScope(ix, f.path, "service "+d.Key.String(), d.Key.Cluster, d.Key.Namespace) {
			continue
		}
		port, perr := backingPort(p, d)
		switch {
		case perr != "":
			vd.Errors = append(vd.Errors, f.path+": "+perr)
		case d.Mesh == (ObjectKey{}):
			vd.Errors = append(vd.Errors, fmt.Sprintf("%s: the mesh of service %s is not known", f.path, d.Key))
		case checkMesh && !vd.serves(d.Mesh):
			vd.Errors = append(vd.Errors, fmt.Sprintf("%s: service %s is in mesh %s.%s, which is not among the meshes of this VirtualDestination", f.path, d.Key, d.Mesh.Name, d.Mesh.Namespace))
		default:
			vd.backing = append(vd.backing, vdBacking{dst: d, port: port})
		}
	}
}

// backingPort is the service port of d that a VirtualDestination port
// sends traffic to: the target number or name when one is set, else the
// same number.
func backingPort(p *networkingv1.VirtualDestinationSpec_Port, d *destination) (uint32, string) {
	switch t := p.GetTargetPort().(type) {
	case *networkingv1.VirtualDestinationSpec_Port_TargetName:
		for _, pi := range d.PortInfo {
			if pi.GetName() == t.TargetName {
				return pi.GetPort(), ""
			}
		}
		return 0, fmt.Sprintf("service %s has no port named %q (spec.port.targetName)", d.Key, t.TargetName)
	case *networkingv1.VirtualDestinationSpec_Port_TargetNumber:
		if slices.Contains(d.Ports, t.TargetNumber) {
			return t.TargetNumber, ""
		}
		return 0, fmt.Sprintf("service %s has no port %d (spec.port.targetNumber)", d.Key, t.TargetNumber)
	}
	if slices.Contains(d.Ports, p.GetNumber()) {
		return p.GetNumber(), ""
	}
	return 0, fmt.Sprintf("service %s has no port %d (spec.port.number; set spec.port.targetNumber or targetName to map it)", d.Key, p.GetNumber())
}

// locality is the Istio locality of a destination's endpoints:
// "region/zone", or "region" when they span zones, or "" when the region
// is not known.
func (d *destination) locality() string {
	switch {
	case d.Region == "":
		return ""
	case d.Zone == "":
		return d.Region
	}
	return d.Region + "/" + d.Zone
}

// emitVirtualDestinations adds, for every valid VirtualDestination, a
// ServiceEntry and a DestinationRule for its hostname in each of its
// meshes, and in each mesh whose services are reached from another
// cluster, a Gateway passing the hostname through the east-west gateway.
//
// The ServiceEntry's endpoints are the backing services: a service in the
// mesh's own cluster by its cluster-local hostname, one in another cluster
// through that cluster's east-west gateway (AUTO_PASSTHROUGH routes the
// SNI of the VirtualDestination hostname to the ServiceEntry there). Each
// endpoint carries its service's locality, except in a static list
// resolved by DNS (see staticDNSLocalities). A local endpoint whose pods
// are in the mesh is labelled as mTLS-capable, as Istio keeps only those
// behind AUTO_PASSTHROUGH. used holds the virtual addresses already given
// out per cluster.
func emitVirtualDestinations(e *emitter, ix *Index, vds *virtualDestinations, used map[string]*addrSet) {
	gatewayHosts := map[*mesh][]string{}
	backing := &backingWorkloads{ix: ix}
	for _, vd := range vds.all {
		if !vd.valid() {
			continue
		}
		spec := vd.Spec
		host := spec.GetHostname()
		proto := vdProtocols[strings.ToLower(spec.GetPort().GetProtocol())]
		portName := strings.ToLower(proto) + "-" + fmt.Sprint(spec.GetPort().GetNumber())
		vdParent := ParentRef{Kind: parentKindVirtualDestination, Name: vd.Key.Name, Namespace: vd.Key.Namespace, Cluster: vd.Key.Cluster}
		static := spec.GetStatic() != nil
		for _, m := range vd.targets {
			as := vd.Meshes[m.RefKey()]
			parents := []ParentRef{vdParent}
			var endpoints []*istiov1alpha3.WorkloadEntry
			dns := false
			for _, b := range vd.backing {
				ep := &istiov1alpha3.WorkloadEntry{Locality: b.dst.locality()}
				if b.dst.Key.Cluster == m.Key.Cluster {
					ep.Address = b.dst.Host
					ep.Ports = map[string]uint32{portName: b.port}
					if inMesh(backing.of(b.dst), m.Key) {
						ep.Labels = map[string]string{LabelTLSMode: "istio"}
					}
					dns = true
				} else {
					server := ix.meshByKey[b.dst.Mesh]
					gw := federationGateway(server)
					if gw == nil {
						as.Warnings = append(as.Warnings, fmt.Sprintf("service %s cannot be reached from this mesh: mesh %s has no east-west gateway with an external address and TLS port", b.dst.Key, server.RefKey()))
						continue
					}
					ep.Address = gw.GetExternalAddress()
					ep.Ports = map[string]uint32{portName: gw.GetExternalTlsPort()}
					if _, err := netip.ParseAddr(ep.Address); err != nil {
						dns = true
					}
					if !slices.Contains(gatewayHosts[server], host) {
						gatewayHosts[server] = append(gatewayHosts[server], host)
					}
				}
				endpoints = append(endpoints, ep)
				parents = append(parents, ParentRef{Kind: parentKindDestination, Name: b.dst.Key.Name, Namespace: b.dst.Key.Namespace, Cluster: b.dst.Key.Cluster})
			}
			if len(endpoints) == 0 {
				as.Warnings = append(as.Warnings, "no backing destination is reachable from this mesh; nothing is written here")
				continue
			}
			res := istiov1alpha3.ServiceEntry_STATIC
			if dns {
				res = istiov1alpha3.ServiceEntry_DNS
			}
			lb := &istiov1alpha3.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)}
			switch {
			case static && dns:
				lb.Failover = staticDNSLocalities(endpoints, ix.clusterRegion(m.Key.Cluster))
				if len(endpoints) > 3 {
					as.Warnings = append(as.Warnings, fmt.Sprintf("the static list is resolved by DNS here, where Istio can order endpoints in three priorities only: the backing destinations from the third on (%d of them) share the last one", len(endpoints)-2))
				}
			case static:
				lb.FailoverPriority = staticFailoverPriority(endpoints)
			default:
				for _, d := range vd.Spec.GetLocalized().GetFailoverDirectives() {
					lb.Failover = append(lb.Failover, &istiov1alpha3.LocalityLoadBalancerSetting_Failover{From: d.GetFrom().GetRegion(), To: d.GetTo()[0].GetRegion()})
				}
			}
			if dns && len(lb.FailoverPriority) > 0 {
				// Istio's CDS build panics on failoverPriority over a DNS
				// ServiceEntry's endpoints in several localities, and
				// istiod exits: never write it, whatever changes above.
				lb.FailoverPriority = nil
				as.Warnings = append(as.Warnings, "failoverPriority over a DNS-resolved ServiceEntry is not written (it crashes istiod); endpoints are ordered by locality")
			}
			if used[m.Key.Cluster] == nil {
				used[m.Key.Cluster] = newAddrSet(0)
			}
			at := ObjectKey{Cluster: m.Key.Cluster, Namespace: m.Namespace, Name: host}
			port := &istiov1alpha3.ServicePort{Number: spec.GetPort().GetNumber(), Name: portName, Protocol: proto}
			e.add(IstioNetworkingV1, KindServiceEntry, at, parents, virtualDestinationServiceEntry(host, federatedAddress(host, used[m.Key.Cluster]).String(), port, res, endpoints))
			e.add(IstioNetworkingV1, KindDestinationRule, at, parents, vd.destinationRule(lb))
		}
	}
	for _, server := range slices.SortedFunc(maps.Keys(gatewayHosts), func(a, b *mesh) int { return a.Key.compare(b.Key) }) {
		gw := federationGateway(server)
		hosts := gatewayHosts[server]
		slices.Sort(hosts)
		ns := cmp.Or(gw.GetService().GetNamespace(), server.Namespace)
		e.add(IstioNetworkingV1, KindGateway, ObjectKey{Cluster: server.Key.Cluster, Namespace: ns, Name: VirtualDestinationGatewayName},
			[]ParentRef{{Kind: parentKindMesh, Name: server.Key.Name, Namespace: server.Key.Namespace, Cluster: server.Key.Cluster}},
			&istiov1alpha3.Gateway{
				Selector: maps.Clone(gw.GetWorkloadLabels()),
				Servers: []*istiov1alpha3.Server{{
					Port:  &istiov1alpha3.Port{Number: cmp.Or(gw.GetTlsContainerPort(), gw.GetExternalTlsPort()), Name: "tls-vd", Protocol: "TLS"},
					Hosts: hosts,
					Tls:   &istiov1alpha3.ServerTLSSettings{Mode: istiov1alpha3.ServerTLSSettings_AUTO_PASSTHROUGH},
				}},
			})
	}
}

// LabelTLSMode marks an endpoint as one that speaks Istio mTLS: Istio
// keeps only such endpoints in the clusters behind an AUTO_PASSTHROUGH
// Gateway.
const LabelTLSMode = "security.istio.io/tlsMode"

// inMesh says whether the workloads behind a destination are known and
// all in mesh m (their sidecars terminate Istio mTLS).
func inMesh(ws []*workload, m ObjectKey) bool {
	for _, w := range ws {
		if w.Mesh != m {
			return false
		}
	}
	return len(ws) > 0
}

// staticFailoverPriority orders the endpoints of a static list resolved
// statically (EDS) with failoverPriority and label value overrides (Istio
// 1.20 and later): with n endpoints there are n-1 rank labels; the i-th
// endpoint (from 0) carries the first n-1-i of them, so Istio gives it
// priority i whatever the client's own labels. It labels the endpoints and
// returns the failoverPriority list.
func staticFailoverPriority(endpoints []*istiov1alpha3.WorkloadEntry) []string {
	ranks := len(endpoints) - 1
	var out []string
	for i := 1; i <= ranks; i++ {
		out = append(out, fmt.Sprintf("%s%d=true", LabelFailoverRankPrefix, i))
	}
	for i, ep := range endpoints {
		for j := 1; j <= ranks-i; j++ {
			if ep.Labels == nil {
				ep.Labels = map[string]string{}
			}
			ep.Labels[fmt.Sprintf("%s%d", LabelFailoverRankPrefix, j)] = "true"
		}
	}
	return out
}

// StaticRankRegion is the locality region the endpoint of rank i (from 1)
// of a static list gets when its ServiceEntry is resolved by DNS.
func StaticRankRegion(i int) string { return fmt.Sprintf("meshplane-static-rank-%d", i) }

// staticDNSLocalities orders the endpoints of a static list whose
// ServiceEntry is resolved by DNS. Istio cannot use failoverPriority there
// (its CDS build panics on a DNS cluster with endpoints in several
// localities), so the order is given by locality, against the clients'
// region, which is their cluster's: the first endpoint is in that region
// (keeping its own locality when that is in the region), the i-th after it
// in region StaticRankRegion(i), and one failover directive sends the
// clients' region to rank 1's. Istio gives the first priority 0 to 2
// (nearer zones first), the second 3 and every later one 4. It sets the
// endpoints' localities and returns the failover directives.
func staticDNSLocalities(endpoints []*istiov1alpha3.WorkloadEntry, region string) []*istiov1alpha3.LocalityLoadBalancerSetting_Failover {
	for i, ep := range endpoints {
		switch {
		case i > 0:
			ep.Locality = StaticRankRegion(i)
		case ep.Locality == region || strings.HasPrefix(ep.Locality, region+"/"):
			// Already in the clients' region.
		default:
			ep.Locality = region
		}
	}
	if len(endpoints) < 2 {
		return nil
	}
	return []*istiov1alpha3.LocalityLoadBalancerSetting_Failover{{From: region, To: StaticRankRegion(1)}}
}

// virtualDestinationStatus is the status written back to a
// VirtualDestination.
func virtualDestinationStatus(enc encode.Encoder, vd *virtualDestination) (*snapshotv1.ResourceStatus, error) {
	s := &networkingv1.VirtualDestinationStatus{
		ObservedGeneration: vd.Meta.GetGeneration(),
		State:              commonv1.ApprovalState_ACCEPTED,
		Errors:             slices.Clone(vd.Errors),
	}
	if vd.lastGood != nil {
		s.Errors = append(slices.Clone(vd.rejected), lastGoodMessage(vd.lastGood.Generation))
		s.LastKnownGood = true
	}
	s.Errors = append(s.Errors, vd.denied...)
	if len(s.Errors) > 0 {
		s.State = commonv1.ApprovalState_INVALID
	}
	if len(vd.Meshes) > 0 {
		s.Meshes = vd.Meshes
	}
	for _, b := range vd.backing {
		s.SelectedDestinations = append(s.SelectedDestinations, &commonv1.ClusterObjectRef{Name: b.dst.Key.Name, Namespace: b.dst.Key.Namespace, Cluster: b.dst.Key.Cluster})
	}
	return resourceStatus(enc, NetworkingV1, KindVirtualDestination, vd.Key, vd.Meta.GetGeneration(), s)
}
