package domain

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// Names and defaults of federation.
const (
	KindServiceEntry = "ServiceEntry"
	KindGateway      = "Gateway"
	// DefaultHostnameSuffix ends federated hostnames when the VirtualMesh
	// names no suffix.
	DefaultHostnameSuffix = "global"
	// FederationGatewayName names the Gateway that lets an east-west
	// gateway pass federated traffic through.
	FederationGatewayName  = "global-federation"
	defaultEastWestTLSPort = 15443
)

// exportedDest is one destination of a server mesh that one VirtualMesh
// exports, with what its client-side objects share in every client mesh.
type exportedDest struct {
	// First what every client-side object is made of. The annotations
	// (made from parents) are the same for every client, so made once
	// per destination and shared. se and dr are the specs for address
	// addr, which most clients get, once hasSpecs.
	host        string
	annotations map[string]string
	se, dr      []byte
	addr        netip.Addr
	hasSpecs    bool

	dst    *destination
	server *mesh
	// sans are the SPIFFE IDs of the service accounts that run dst, in
	// the server mesh's trust domain, sorted: the client-side
	// ServiceEntry's subjectAltNames.
	sans    []string
	gw      *discoveryv1.MeshSpec_Gateway
	vm      *virtualMesh
	parents []ParentRef
	// addr0 is the first address candidate of host, when ok0.
	addr0 netip.Addr
	ok0   bool
	// group tells hosts apart: exportedDests with the same host have the
	// same, and groups are in host order.
	group int
	// subsets names the subsets of the client-side DestinationRule: those
	// the destination's own DestinationRule has, which policies name
	// (exportedSubsets). drParents and drAnnotations, when subsets are
	// set, are the client-side DestinationRule's parents: those of the
	// ServiceEntry and the policies that name the subsets.
	subsets       []string
	drParents     []ParentRef
	drAnnotations map[string]string
}

// export is one exported destination with its clients, in the order
// found.
type export struct {
	host string
	x    *exportedDest
	// The clients, in one of the chunks emitFederation keeps them in.
	clients []exportClient
}

// exportClient is one client of an export: the index of its mesh among
// the VirtualMesh's members, and of its cluster among the numbered ones.
// It holds no pointer, so that the array of all of them is not scanned.
type exportClient struct {
	member, cluster int32
}

// federatedHost is one destination of a server mesh made available to one
// client mesh.
type federatedHost struct {
	*exportedDest
	client *mesh
}

// ownObject is an object the emitter has in one cluster, outside the
// federated blocks, named as a federated host.
type ownObject struct {
	group     int
	namespace string
}

// hostThenClientOrder says whether fhs, which are in host order, are in
// client order for each host too. The clients of one export are in member
// order already, which is theirs.
func hostThenClientOrder(fhs []federatedHost) bool {
	for i := 1; i < len(fhs); i++ {
		a, b := fhs[i-1], fhs[i]
		if a.exportedDest != b.exportedDest && a.group == b.group && a.client.Key.compare(b.client.Key) > 0 {
			return false
		}
	}
	return true
}

// FederatedHostname is the name clients in other meshes use for a
// destination: <name>.<namespace>.svc.<cluster>.<suffix>.
func FederatedHostname(name, namespace, cluster, suffix string) string {
	return name + "." + namespace + ".svc." + cluster + "." + cmp.Or(suffix, DefaultHostnameSuffix)
}

// emitFederation adds, for every VirtualMesh of two or more meshes with
// federation: in each client mesh a ServiceEntry and a DestinationRule per
// destination exported to it, and in each server mesh a Gateway that passes
// the federated hostnames through its east-west gateway plus a
// ServiceEntry per exported destination. addrs collects the virtual
// addresses given out, per client cluster. The server-side ServiceEntry gives
// the federated hostname the local workloads as endpoints: the client's
// SNI names the federated hostname, and AUTO_PASSTHROUGH routes it only to
// a cluster of that name.
//
// Subsets of a federated destination (those its own DestinationRule has)
// are reached by SNI, as in Istio's multi-network model: the client-side
// DestinationRule has each subset by name, without labels, so that every
// subset's cluster has the gateway as its endpoint and the client names
// the subset in its SNI (outbound_.<port>_.<subset>_.<host>); a
// DestinationRule for the federated host in the server mesh gives the
// subsets their labels, for which the east-west gateway's AUTO_PASSTHROUGH
// listener has a cluster per subset over the server-side ServiceEntry's
// endpoints. tr gives the subsets.
func emitFederation(e *emitter, ix *Index, vms *virtualMeshes, tr *trafficTranslation, addrs map[string]*addrSet) error {
	f := &federation{e: e, ix: ix, tr: tr, encodings: newHostEncodings(e.enc), backing: &backingWorkloads{ix: ix}, clusterIndex: map[string]int{}}
	for _, vm := range vms.all {
		f.exportVirtualMesh(vm)
	}
	byClient, groups := f.byClient()
	order := make([]int, len(f.clusters))
	for ci := range order {
		order[ci] = ci
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(f.clusters[a], f.clusters[b]) })
	warned := map[*mesh]bool{}
	for _, ci := range order {
		if len(byClient[ci]) == 0 {
			continue
		}
		if err := f.emitClientCluster(f.clusters[ci], byClient[ci], groups, addrs, warned); err != nil {
			return err
		}
	}
	return nil
}

// federation is what emitFederation gathers: the exports, and the client
// clusters, numbered in the order first met.
type federation struct {
	e         *emitter
	ix        *Index
	tr        *trafficTranslation
	encodings *hostEncodings
	backing   *backingWorkloads

	exports      []export
	clients      []exportClient // the chunk the clients of exports go in
	counts       []int          // clients by cluster
	clusterIndex map[string]int
	clusters     []string
}

// exportVirtualMesh exports what each member of vm serves to the members
// that may reach it, when vm federates two or more meshes.
func (f *federation) exportVirtualMesh(vm *virtualMesh) {
	fed := vm.Spec.GetFederation()
	if len(vm.Errors) > 0 || fed == nil || len(vm.Members) < 2 {
		return
	}
	if fed.GetMode() == nil {
		return
	}
	suffix := cmp.Or(fed.GetHostnameSuffix(), DefaultHostnameSuffix)
	if fed.GetFlatNetwork() {
		for _, m := range vm.Members {
			as := vm.Meshes[m.RefKey()]
			as.Warnings = append(as.Warnings, "spec.federation.flatNetwork is not translated yet; federated traffic goes through east-west gateways")
		}
	}
	v := vmExport{vm: vm, exported: exportRule(f.ix, vm), suffix: suffix,
		parent: ParentRef{Kind: parentKindVirtualMesh, Name: vm.Key.Name, Namespace: vm.Key.Namespace, Cluster: vm.Key.Cluster}}
	// The members' clusters, numbered.
	v.memberCluster = make([]int, len(vm.Members))
	for j, m := range vm.Members {
		ci, ok := f.clusterIndex[m.Key.Cluster]
		if !ok {
			ci = len(f.clusters)
			f.clusterIndex[m.Key.Cluster] = ci
			f.clusters = append(f.clusters, m.Key.Cluster)
			f.counts = append(f.counts, 0)
		}
		v.memberCluster[j] = ci
	}
	for _, server := range vm.Members {
		f.exportServer(v, server)
	}
}

// vmExport is a VirtualMesh being exported: its rule, hostname suffix,
// parent reference, and each member's client cluster number.
type vmExport struct {
	vm            *virtualMesh
	exported      *exportRules
	suffix        string
	parent        ParentRef
	memberCluster []int
}

// exportServer exports server's destinations, and adds the Gateway that
// passes their federated hostnames through its east-west gateway.
func (f *federation) exportServer(v vmExport, server *mesh) {
	vm := v.vm
	gw := federationGateway(server)
	if gw == nil {
		as := vm.Meshes[server.RefKey()]
		as.Warnings = append(as.Warnings, "the mesh has no east-west gateway with an external address and TLS port; its destinations are not federated")
		return
	}
	var hosts []string
	for _, d := range f.ix.byCluster[server.Key.Cluster] {
		if d.Mesh != server.Key || !v.exported.exportsAny(d) {
			continue
		}
		if host, ok := f.exportDestination(v, server, gw, d); ok {
			hosts = append(hosts, host)
		}
	}
	if len(hosts) == 0 {
		return
	}
	ns := cmp.Or(gw.GetService().GetNamespace(), server.Namespace)
	f.e.add(IstioNetworkingV1, KindGateway, ObjectKey{Cluster: server.Key.Cluster, Namespace: ns, Name: FederationGatewayName}, []ParentRef{v.parent},
		&istiov1alpha3.Gateway{
			Selector: maps.Clone(gw.GetWorkloadLabels()),
			Servers: []*istiov1alpha3.Server{{
				Port:  &istiov1alpha3.Port{Number: cmp.Or(gw.GetTlsContainerPort(), gw.GetExternalTlsPort()), Name: "tls", Protocol: "TLS"},
				Hosts: []string{"*." + v.suffix},
				Tls:   &istiov1alpha3.ServerTLSSettings{Mode: istiov1alpha3.ServerTLSSettings_AUTO_PASSTHROUGH},
			}},
		})
}

// exportDestination exports d to the members that may reach it, and adds
// its server-side objects: the ServiceEntry that gives its federated host
// the local workloads, and the DestinationRule with its subsets' labels.
// It returns the federated host; ok is false when no member reaches d.
func (f *federation) exportDestination(v vmExport, server *mesh, gw *discoveryv1.MeshSpec_Gateway, d *destination) (host string, ok bool) {
	vm := v.vm
	host = FederatedHostname(d.Key.Name, d.Key.Namespace, d.Key.Cluster, v.suffix)
	dParent := ParentRef{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster}
	var x *exportedDest
	var sub *federatedSubsets
	if cap(f.clients)-len(f.clients) < len(vm.Members) {
		// Chunks, as growing one array for all would copy
		// it and leave garbage several times its size.
		f.clients = make([]exportClient, 0, max(1<<16, len(vm.Members)))
	}
	from := len(f.clients)
	for j, client := range vm.Members {
		if client.Key == server.Key || client.Key.Cluster == server.Key.Cluster || !v.exported.exports(d, client) {
			continue
		}
		if x == nil {
			parents := []ParentRef{v.parent, dParent}
			x = &exportedDest{host: host, dst: d, server: server, gw: gw, vm: vm, parents: parents, annotations: encode.ParentsAnnotation(parents)}
			x.sans = spiffeIDs(server.TrustDomain, f.backing.of(d))
			if len(x.sans) == 0 {
				as := vm.Meshes[server.RefKey()]
				as.Warnings = append(as.Warnings, fmt.Sprintf("no discovered workload runs service %s: its clients check the server's certificate against the shared root only, not its service accounts", d.Key))
			}
			x.addr0, x.ok0 = candidateAddress(host, 0)
			if sub = exportedSubsets(f.tr, d); sub != nil {
				x.subsets = sub.names
				x.drParents = append(slices.Clone(parents), sub.parents...)
				x.drAnnotations = encode.ParentsAnnotation(x.drParents)
			}
		}
		f.clients = append(f.clients, exportClient{member: int32(j), cluster: int32(v.memberCluster[j])})
		f.counts[v.memberCluster[j]]++
	}
	if x == nil {
		return "", false
	}
	f.exports = append(f.exports, export{host: host, x: x, clients: f.clients[from:len(f.clients):len(f.clients)]})
	if sub != nil && len(d.Selector) > 0 {
		// The subsets' labels, for the east-west gateway.
		f.e.add(IstioNetworkingV1, KindDestinationRule, ObjectKey{Cluster: server.Key.Cluster, Namespace: d.Key.Namespace, Name: host}, x.drParents,
			serverDestinationRule(host, sub.subsets))
	}
	vm.federated = append(vm.federated, d.Key)
	if len(d.Selector) > 0 {
		for _, p := range d.PortInfo {
			if p.GetTargetPortName() != "" {
				as := vm.Meshes[server.RefKey()]
				as.Warnings = append(as.Warnings, fmt.Sprintf("service %s port %d has the named target port %q, whose number discovery does not know; federated traffic reaches its pods on port %d", d.Key, p.GetPort(), p.GetTargetPortName(), p.GetPort()))
			}
		}
		f.e.add(IstioNetworkingV1, KindServiceEntry, ObjectKey{Cluster: server.Key.Cluster, Namespace: d.Key.Namespace, Name: host}, []ParentRef{v.parent, dParent},
			serverServiceEntry(host, d))
	}
	return host, true
}

// byClient returns the federated hosts of each client cluster (by
// number), and the host groups: each host's first export.
func (f *federation) byClient() ([][]federatedHost, map[string]int) {
	exports := f.exports
	// Each client's hosts must be in host order, then client mesh order:
	// distributing the exports in host order leaves only ties on a host
	// (two client meshes in one cluster) for the sort below.
	slices.SortStableFunc(exports, func(a, b export) int { return strings.Compare(a.host, b.host) })
	relocateExports(exports)
	// Hosts are told apart by the first export with the same host.
	groups := make(map[string]int, len(exports))
	for i, ex := range exports {
		x := ex.x
		if i > 0 && ex.host == exports[i-1].host {
			x.group = exports[i-1].x.group
			continue
		}
		x.group = i
		groups[x.host] = i
	}
	byClient := make([][]federatedHost, len(f.clusters))
	for ci, n := range f.counts {
		byClient[ci] = make([]federatedHost, 0, n)
	}
	for _, ex := range exports {
		members := ex.x.vm.Members
		for _, c := range ex.clients {
			byClient[c.cluster] = append(byClient[c.cluster], federatedHost{exportedDest: ex.x, client: members[c.member]})
		}
	}
	return byClient, groups
}

// emitClientCluster adds the ServiceEntry and DestinationRule pairs of the
// hosts federated to cluster, fhs.
func (f *federation) emitClientCluster(cluster string, fhs []federatedHost, groups map[string]int, addrs map[string]*addrSet, warned map[*mesh]bool) error {
	e := f.e
	var last *mesh
	for _, fh := range fhs {
		if fh.client != last && !fh.client.SmartDNS && !warned[fh.client] {
			warned[fh.client] = true
			as := fh.vm.Meshes[fh.client.RefKey()]
			as.Warnings = append(as.Warnings, "istiod's DNS proxying (ISTIO_META_DNS_CAPTURE) is off in this mesh; its workloads cannot resolve federated hostnames")
		}
		last = fh.client
	}
	if !hostThenClientOrder(fhs) {
		slices.SortFunc(fhs, func(a, b federatedHost) int {
			return cmp.Or(strings.Compare(a.host, b.host), a.client.Key.compare(b.client.Key))
		})
	}
	used := addrs[cluster]
	if used == nil {
		used = newAddrSet(len(fhs))
		addrs[cluster] = used
	}
	b := e.federatedBlock(cluster, len(fhs))
	// The emitter's own ServiceEntries in the cluster whose name is a
	// federated host, by host group, which the hosts are checked
	// against in order.
	var own []ownObject
	for _, k := range e.namesOutsideBlocks(cluster, IstioNetworkingV1, KindServiceEntry) {
		if g, ok := groups[k[0]]; ok {
			own = append(own, ownObject{group: g, namespace: k[1]})
		}
	}
	slices.SortFunc(own, func(a, b ownObject) int { return cmp.Compare(a.group, b.group) })
	// The pairs of the current host start at run.
	group, run := -1, 0
	for _, fh := range fhs {
		x := fh.exportedDest
		if x.group != group {
			group, run = x.group, len(b.pairs)
		}
		ns := fh.client.Namespace
		// The same host for another client mesh of this cluster in the
		// same namespace, or an object the emitter has already.
		if p := b.hostPairIn(run, ns); p != nil {
			p.merge(pairServiceEntry, x.parents)
			p.merge(pairDestinationRule, x.parents)
			continue
		}
		for len(own) > 0 && own[0].group < x.group {
			own = own[1:]
		}
		if len(own) > 0 && own[0].group == x.group && slices.ContainsFunc(own, func(o ownObject) bool { return o.group == x.group && o.namespace == ns }) {
			at := ObjectKey{Cluster: cluster, Namespace: ns, Name: x.host}
			e.add(IstioNetworkingV1, KindServiceEntry, at, x.parents, nil)
			e.add(IstioNetworkingV1, KindDestinationRule, at, x.parents, nil)
			continue
		}
		addr := x.address(used)
		var enc *encodedHost // nil: x's own specs
		if !x.hasSpecs || x.addr != addr {
			got, err := f.encodings.get(x, addr)
			if err != nil {
				return err
			}
			if x.hasSpecs {
				enc = got
			} else {
				x.se, x.dr, x.addr, x.hasSpecs = got.se, got.dr, addr, true
			}
		}
		e.addFederated(b, ns, x, enc)
	}
	return nil
}

// relocateExports moves what the clients of exports share into one array,
// and their hosts into one string, in the exports' order, which is host
// order: every client cluster's objects are made and hashed in host
// order, and then read memory in order rather than from all over the heap.
func relocateExports(exports []export) {
	xs := make([]exportedDest, len(exports))
	size := 0
	for _, ex := range exports {
		size += len(ex.x.host)
	}
	var hosts strings.Builder
	hosts.Grow(size)
	for _, ex := range exports {
		hosts.WriteString(ex.x.host)
	}
	all, at := hosts.String(), 0
	for i := range exports {
		x := &xs[i]
		*x = *exports[i].x
		x.host = all[at : at+len(x.host)]
		at += len(x.host)
		exports[i].x = x
	}
}

// address is federatedAddress for the host in a client cluster that has
// given out used: the host's first candidate when it is free.
func (x *exportedDest) address(used *addrSet) netip.Addr {
	if x.ok0 && used.add(x.addr0) {
		return x.addr0
	}
	return federatedAddress(x.host, used)
}

// encodedHost holds the client-side specs of one federated host, which
// are the same in every client mesh that got the same address: encoding
// them once instead of once per client is most of federation's cost.
type encodedHost struct {
	addr   netip.Addr
	se, dr []byte
}

type hostEncodings struct {
	byHost map[string]*encodedHost
	// ServiceEntry encodings with placeholders for the host and the
	// address, by everything else the ServiceEntry holds: the hosts of
	// one server mesh usually differ in nothing else.
	templates map[string]*encode.Template
	enc       encode.Encoder
}

func newHostEncodings(enc encode.Encoder) *hostEncodings {
	return &hostEncodings{byHost: map[string]*encodedHost{}, templates: map[string]*encode.Template{}, enc: enc}
}

func (h *hostEncodings) get(fh *exportedDest, addr netip.Addr) (*encodedHost, error) {
	if enc, ok := h.byHost[fh.host]; ok && enc.addr == addr {
		return enc, nil
	}
	se, err := h.serviceEntry(fh, addr)
	if err != nil {
		return nil, fmt.Errorf("ServiceEntry for %s: %w", fh.host, err)
	}
	dr, err := clientDestinationRule(h.enc, fh.host, fh.subsets)
	if err != nil {
		return nil, fmt.Errorf("DestinationRule for %s: %w", fh.host, err)
	}
	enc := &encodedHost{addr: addr, se: se, dr: dr}
	if _, ok := h.byHost[fh.host]; !ok {
		h.byHost[fh.host] = enc
	}
	return enc, nil
}

// exportRules say whether a VirtualMesh exports destination d to mesh
// client: every destination to every mesh when federation is permissive;
// otherwise those a selective selector names, to the meshes it names. They
// are not safe for concurrent use.
type exportRules struct {
	rules []exportSelector // nil: permissive
	// Callers ask about one destination for every client in turn: which
	// rules select the last destination is kept.
	last    *destination
	selects []bool
	any     bool // some rule selects last
}

type exportSelector struct {
	dests  map[ObjectKey]bool // nil: every destination
	meshes map[[2]string]bool // nil: every mesh
}

func exportRule(ix *Index, vm *virtualMesh) *exportRules {
	sel := vm.Spec.GetFederation().GetSelective()
	if sel == nil {
		return &exportRules{}
	}
	var rules []exportSelector
	for _, s := range sel.GetSelectors() {
		var r exportSelector
		if len(s.GetDestinationSelectors()) > 0 {
			r.dests = map[ObjectKey]bool{}
			for _, d := range ix.selectDestinations(s.GetDestinationSelectors(), vm.Key) {
				r.dests[d.Key] = true
			}
		}
		if len(s.GetMeshes()) > 0 {
			r.meshes = map[[2]string]bool{}
			for _, m := range s.GetMeshes() {
				r.meshes[[2]string{m.GetNamespace(), m.GetName()}] = true
			}
		}
		rules = append(rules, r)
	}
	return &exportRules{rules: rules, selects: make([]bool, len(rules))}
}

// exportsAny says whether d may be exported to some mesh: when it is
// false, exports is false for every client.
func (x *exportRules) exportsAny(d *destination) bool {
	if x.selects == nil {
		return true
	}
	x.lookAt(d)
	return x.any
}

func (x *exportRules) lookAt(d *destination) {
	if d == x.last {
		return
	}
	x.last, x.any = d, false
	for i, r := range x.rules {
		x.selects[i] = r.dests == nil || r.dests[d.Key]
		x.any = x.any || x.selects[i]
	}
}

// exports says whether d is exported to client.
func (x *exportRules) exports(d *destination, client *mesh) bool {
	if x.selects == nil {
		return true
	}
	x.lookAt(d)
	for i, r := range x.rules {
		if x.selects[i] && (r.meshes == nil || r.meshes[[2]string{client.Key.Namespace, client.Key.Name}]) {
			return true
		}
	}
	return false
}

// federationGateway is the east-west gateway that other meshes reach the
// server mesh through: the first one with an external address.
func federationGateway(m *mesh) *discoveryv1.MeshSpec_Gateway {
	for _, g := range m.EastWest {
		if g.GetExternalAddress() != "" && len(g.GetWorkloadLabels()) > 0 {
			if g.GetExternalTlsPort() == 0 {
				g = &discoveryv1.MeshSpec_Gateway{WorkloadLabels: g.GetWorkloadLabels(), ExternalAddress: g.GetExternalAddress(), ExternalTlsPort: defaultEastWestTLSPort, TlsContainerPort: g.GetTlsContainerPort(), Service: g.GetService()}
			}
			return g
		}
	}
	return nil
}

// spiffeIDs are the SPIFFE IDs of the service accounts that run
// workloads, in trust domain td, sorted and without repeats.
func spiffeIDs(td string, workloads []*workload) []string {
	var out []string
	for _, w := range workloads {
		if w.ServiceAccount == "" {
			continue
		}
		out = append(out, "spiffe://"+td+"/ns/"+w.Key.Namespace+"/sa/"+w.ServiceAccount)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// federatedAddress is a stable virtual IP for host in 240.0.0.0/4, which
// is reserved and never routed: a hash of the host, rehashed with a counter
// on a collision with an address in used. Clients need one because a
// ServiceEntry for a hostname that DNS cannot resolve is reached through
// Istio's DNS proxy, which answers with it.
func federatedAddress(host string, used *addrSet) netip.Addr {
	for i := 0; ; i++ {
		addr, ok := candidateAddress(host, i)
		if !ok {
			continue
		}
		if used.add(addr) {
			return addr
		}
	}
}

// addrSet is the virtual addresses given out in one cluster. Federation
// gives out one per federated host in every client cluster: an open
// addressing table of IPv4 addresses costs a fraction of a map's inserts.
type addrSet struct {
	slots []uint32 // 0 is free; no address given out is 0.0.0.0
	n     int
	other map[netip.Addr]struct{} // any other address
}

func newAddrSet(hint int) *addrSet {
	size := 64
	for size < 2*hint {
		size *= 2
	}
	return &addrSet{slots: make([]uint32, size)}
}

// add adds addr and says whether it was not in the set yet.
func (s *addrSet) add(addr netip.Addr) bool {
	if !addr.Is4() || addr.As4() == [4]byte{} {
		if _, ok := s.other[addr]; ok {
			return false
		}
		if s.other == nil {
			s.other = map[netip.Addr]struct{}{}
		}
		s.other[addr] = struct{}{}
		return true
	}
	b := addr.As4()
	v := binary.BigEndian.Uint32(b[:])
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint32(len(s.slots) - 1)
	for i := (v * 0x9e3779b1) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case v:
			return false
		case 0:
			s.slots[i] = v
			s.n++
			return true
		}
	}
}

func (s *addrSet) grow() {
	old := s.slots
	s.slots = make([]uint32, 2*len(old))
	mask := uint32(len(s.slots) - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := (v * 0x9e3779b1) & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = v
	}
}

// candidateAddress is the i-th address tried for host; false for the
// limited broadcast address, which is never used.
func candidateAddress(host string, i int) (netip.Addr, bool) {
	seed := host
	if i > 0 {
		seed = fmt.Sprintf("%s#%d", host, i)
	}
	sum := sha256.Sum256([]byte(seed))
	v := binary.BigEndian.Uint32(sum[:4])&0x0fffffff | 0xf0000000
	if v == 0xffffffff { // the limited broadcast address
		return netip.Addr{}, false
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b), true
}

// federatedDestinations lists what a VirtualMesh federates, for its status.
func (vm *virtualMesh) federatedDestinations() []*commonv1.ClusterObjectRef {
	keys := slices.Clone(vm.federated)
	slices.SortFunc(keys, func(a, b ObjectKey) int { return a.compare(b) })
	keys = slices.Compact(keys)
	out := make([]*commonv1.ClusterObjectRef, 0, len(keys))
	for _, k := range keys {
		out = append(out, &commonv1.ClusterObjectRef{Name: k.Name, Namespace: k.Namespace, Cluster: k.Cluster})
	}
	return out
}

// federationLookup tells, before federation's objects are made, what
// emitFederation makes of a destination: the client meshes it is exported
// to and the host they reach it by. Route policies use it to write the
// VirtualServices of those clients, and to send traffic to a service of
// another cluster. Not safe for concurrent use.
type federationLookup struct {
	ix    *Index
	vms   *virtualMeshes
	rules map[*virtualMesh]*exportRules
}

// federatedClient is a client mesh that reaches a destination as host,
// through the VirtualMesh vm.
type federatedClient struct {
	mesh *mesh
	host string
	vm   *virtualMesh
}

func newFederationLookup(ix *Index, vms *virtualMeshes) *federationLookup {
	return &federationLookup{ix: ix, vms: vms, rules: map[*virtualMesh]*exportRules{}}
}

// exporter is the VirtualMesh that federates d's mesh, d's server mesh and
// the VirtualMesh's export rules, under the conditions emitFederation
// writes anything; vm is nil when d is federated nowhere.
func (f *federationLookup) exporter(d *destination) (vm *virtualMesh, server *mesh, rules *exportRules) {
	if f == nil || d.Mesh == (ObjectKey{}) {
		return nil, nil, nil
	}
	vm = f.vms.vmOf(d.Mesh)
	if vm == nil || len(vm.Errors) > 0 || len(vm.Members) < 2 || vm.Spec.GetFederation().GetMode() == nil {
		return nil, nil, nil
	}
	server = f.ix.meshByKey[d.Mesh]
	if server == nil || federationGateway(server) == nil {
		return nil, nil, nil
	}
	rules, ok := f.rules[vm]
	if !ok {
		rules = exportRule(f.ix, vm)
		f.rules[vm] = rules
	}
	if !rules.exportsAny(d) {
		return nil, nil, nil
	}
	return vm, server, rules
}

// hostFor is the federated host by which mesh client reaches d, when a
// VirtualMesh exports d to it.
func (f *federationLookup) hostFor(d *destination, client ObjectKey) (string, bool) {
	vm, server, rules := f.exporter(d)
	if vm == nil || client.Cluster == server.Key.Cluster {
		return "", false
	}
	i, found := slices.BinarySearchFunc(vm.Members, client, func(m *mesh, k ObjectKey) int { return m.Key.compare(k) })
	if !found || !rules.exports(d, vm.Members[i]) {
		return "", false
	}
	return FederatedHostname(d.Key.Name, d.Key.Namespace, d.Key.Cluster, vm.Spec.GetFederation().GetHostnameSuffix()), true
}

// clients are the meshes d is exported to, in key order.
func (f *federationLookup) clients(d *destination) []federatedClient {
	vm, server, rules := f.exporter(d)
	if vm == nil {
		return nil
	}
	var out []federatedClient
	host := FederatedHostname(d.Key.Name, d.Key.Namespace, d.Key.Cluster, vm.Spec.GetFederation().GetHostnameSuffix())
	for _, c := range vm.Members {
		if c.Key.Cluster == server.Key.Cluster || !rules.exports(d, c) {
			continue
		}
		out = append(out, federatedClient{mesh: c, host: host, vm: vm})
	}
	return out
}

// federatedSubsets are the subsets of a federated destination: their
// names, the subsets with their labels, and the policies that name them.
type federatedSubsets struct {
	names   []string
	subsets []*istiov1alpha3.Subset
	parents []ParentRef
}

// exportedSubsets are the subsets of d's own DestinationRule, which its
// federated host has too; nil when there are none.
func exportedSubsets(tr *trafficTranslation, d *destination) *federatedSubsets {
	if tr == nil {
		return nil
	}
	st := tr.states[d.Key]
	if st == nil || len(st.contrib) == 0 {
		return nil
	}
	subsets := st.subsets()
	out := &federatedSubsets{}
	for _, name := range slices.Sorted(maps.Keys(subsets)) {
		out.names = append(out.names, name)
		out.subsets = append(out.subsets, &istiov1alpha3.Subset{Name: name, Labels: maps.Clone(subsets[name])})
	}
	var policies []ObjectKey
	for _, refs := range st.contrib {
		for _, r := range refs {
			policies = append(policies, r.policy)
		}
	}
	for _, p := range uniqueKeys(policies) {
		out.parents = append(out.parents, ParentRef{Kind: parentKindTraffic, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster})
	}
	return out
}

// subsetNames is a destination's subsets and the policies that name them,
// which federation's DestinationRules are made of, for telling whether
// they changed.
func subsetNames(st *destState) string {
	if len(st.contrib) == 0 {
		return ""
	}
	var policies []ObjectKey
	for _, refs := range st.contrib {
		for _, r := range refs {
			policies = append(policies, r.policy)
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(slices.Sorted(maps.Keys(st.subsets())), ","))
	for _, p := range uniqueKeys(policies) {
		b.WriteString(";" + p.String())
	}
	return b.String()
}

// exportedSubsetNames are the subsets (subsetNames) of every federated
// destination that has some, for an incremental translation to tell when
// federation's objects change.
func exportedSubsetNames(vms *virtualMeshes, tr *trafficTranslation) map[ObjectKey]string {
	out := map[ObjectKey]string{}
	for _, vm := range vms.all {
		for _, k := range vm.federated {
			if st := tr.states[k]; st != nil && len(st.contrib) > 0 {
				out[k] = subsetNames(st)
			}
		}
	}
	return out
}
