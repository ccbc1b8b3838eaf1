package domain

// ServiceEntries: every ServiceEntry translation writes is made here, the
// rules choosing which and calling in.
//
//   - a federated host's in the server cluster, which gives it the
//     destination's workloads (serverServiceEntry), and in each client
//     cluster, through the server's east-west gateway (clientServiceEntry,
//     encoded from templates by hostEncodings.serviceEntry);
//   - a VirtualDestination's hostname in every mesh, with the backing
//     destinations as endpoints (virtualDestinationServiceEntry).

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"

	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// serverServiceEntry is the ServiceEntry of federated host in the server
// cluster of destination d: the host, d's ports, and d's workloads (by
// its selector), which the east-west gateway sends the host's traffic to.
func serverServiceEntry(host string, d *destination) *istiov1alpha3.ServiceEntry {
	return &istiov1alpha3.ServiceEntry{
		Hosts:            []string{host},
		Ports:            serverServiceEntryPorts(d),
		Location:         istiov1alpha3.ServiceEntry_MESH_INTERNAL,
		Resolution:       istiov1alpha3.ServiceEntry_STATIC,
		WorkloadSelector: &istiov1alpha3.WorkloadSelector{Labels: maps.Clone(d.Selector)},
	}
}

// clientServiceEntry is the ServiceEntry of federated host fh.host in a
// client cluster, written as host at address (the placeholders, for a
// template): ports, the server's east-west gateway as the one endpoint,
// and the service accounts that run the destination as the names its
// certificate may carry.
func clientServiceEntry(fh *exportedDest, ports []*istiov1alpha3.ServicePort, host, address string) *istiov1alpha3.ServiceEntry {
	ep := &istiov1alpha3.WorkloadEntry{Address: fh.gw.GetExternalAddress(), Ports: map[string]uint32{}}
	for _, p := range ports {
		ep.Ports[p.GetName()] = fh.gw.GetExternalTlsPort()
	}
	res := istiov1alpha3.ServiceEntry_DNS
	if _, err := netip.ParseAddr(fh.gw.GetExternalAddress()); err == nil {
		res = istiov1alpha3.ServiceEntry_STATIC
	}
	return &istiov1alpha3.ServiceEntry{
		Hosts:           []string{host},
		Addresses:       []string{address},
		Ports:           ports,
		Location:        istiov1alpha3.ServiceEntry_MESH_INTERNAL,
		Resolution:      res,
		Endpoints:       []*istiov1alpha3.WorkloadEntry{ep},
		SubjectAltNames: fh.sans,
	}
}

// virtualDestinationServiceEntry is the ServiceEntry of a
// VirtualDestination's hostname host in one mesh, at address, with its
// one port, resolved as res, and the backing destinations as endpoints.
func virtualDestinationServiceEntry(host, address string, port *istiov1alpha3.ServicePort, res istiov1alpha3.ServiceEntry_Resolution, endpoints []*istiov1alpha3.WorkloadEntry) *istiov1alpha3.ServiceEntry {
	return &istiov1alpha3.ServiceEntry{
		Hosts:      []string{host},
		Addresses:  []string{address},
		Ports:      []*istiov1alpha3.ServicePort{port},
		Location:   istiov1alpha3.ServiceEntry_MESH_INTERNAL,
		Resolution: res,
		Endpoints:  endpoints,
	}
}

// Placeholders of the ServiceEntry templates.
const (
	hostPlaceholder    = "host.placeholder.meshplane.dev"
	addressPlaceholder = "address.placeholder.meshplane.dev"
)

// serviceEntry encodes the client-side ServiceEntry of fh with address
// addr: from the template of its kind when the host needs no escaping in
// JSON (the bytes encode.Spec gives; the fuzz test checks them against
// protojson), else with encode.Spec.
func (h *hostEncodings) serviceEntry(fh *exportedDest, addr netip.Addr) ([]byte, error) {
	ports := serviceEntryPorts(fh.dst)
	build := func(host, address string) *istiov1alpha3.ServiceEntry {
		return clientServiceEntry(fh, ports, host, address)
	}
	address := addr.String()
	if !encode.Plain(fh.host) || !encode.Plain(address) {
		return h.enc.Spec(build(fh.host, address))
	}
	var key strings.Builder
	key.WriteString(fh.gw.GetExternalAddress())
	key.WriteByte(0)
	key.WriteString(strconv.FormatUint(uint64(fh.gw.GetExternalTlsPort()), 10))
	for _, p := range ports {
		key.WriteByte(0)
		key.WriteString(strconv.FormatUint(uint64(p.GetNumber()), 10))
		key.WriteByte(0)
		key.WriteString(p.GetName())
		key.WriteByte(0)
		key.WriteString(p.GetProtocol())
	}
	for _, san := range fh.sans {
		key.WriteByte(1)
		key.WriteString(san)
	}
	t, ok := h.templates[key.String()]
	if !ok {
		raw, err := h.enc.Spec(build(hostPlaceholder, addressPlaceholder))
		if err != nil {
			return nil, err
		}
		t = encode.NewTemplate(raw, hostPlaceholder, addressPlaceholder)
		h.templates[key.String()] = t
	}
	if t == nil {
		return h.enc.Spec(build(fh.host, address))
	}
	return t.Fill(fh.host, address), nil
}

// serviceEntryPorts copies a destination's ports, with the protocol Istio
// infers from the port's appProtocol or name prefix (TCP when neither
// says).
func serviceEntryPorts(d *destination) []*istiov1alpha3.ServicePort {
	var out []*istiov1alpha3.ServicePort
	for _, p := range d.PortInfo {
		if p.GetPort() == 0 || p.GetPort() > 65535 || strings.EqualFold(p.GetProtocol(), "UDP") {
			continue
		}
		name := cmp.Or(p.GetName(), fmt.Sprintf("port-%d", p.GetPort()))
		out = append(out, &istiov1alpha3.ServicePort{Number: p.GetPort(), Name: name, Protocol: portProtocol(p.GetAppProtocol(), name)})
	}
	return out
}

// serverServiceEntryPorts are the ports of the server-side ServiceEntry
// of a federated destination, which selects its pods: each carries the
// Service's numeric target port, since Istio would otherwise send the
// east-west gateway's traffic to the pod on the service port. A named
// target port has no number to give; Istio then uses the service port.
func serverServiceEntryPorts(d *destination) []*istiov1alpha3.ServicePort {
	ports := serviceEntryPorts(d)
	for _, p := range ports {
		p.TargetPort = d.TargetPorts[p.GetNumber()]
	}
	return ports
}

var istioProtocols = map[string]string{
	"http": "HTTP", "http2": "HTTP2", "https": "HTTPS", "grpc": "GRPC", "grpc-web": "GRPC-WEB",
	"tcp": "TCP", "tls": "TLS", "mongo": "MONGO", "mysql": "MYSQL", "redis": "REDIS",
	"kubernetes.io/h2c": "HTTP2",
}

func portProtocol(appProtocol, name string) string {
	if p, ok := istioProtocols[strings.ToLower(appProtocol)]; ok {
		return p
	}
	prefix, _, _ := strings.Cut(strings.ToLower(name), "-")
	if p, ok := istioProtocols[prefix]; ok {
		return p
	}
	return "TCP"
}
