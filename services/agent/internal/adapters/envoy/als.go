package envoy

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/types/known/durationpb"
)

// accessLogServer is the Envoy Access Log Service (v3): each proxy keeps a
// stream open and sends batches of entries, its node only in the first.
type accessLogServer struct {
	accesslogv3.UnimplementedAccessLogServiceServer
	sink *app.AccessLogs
	log  *slog.Logger
}

func (s *accessLogServer) StreamAccessLogs(stream accesslogv3.AccessLogService_StreamAccessLogsServer) error {
	var w domain.ProxyWorkload
	var logName string
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&accesslogv3.StreamAccessLogsResponse{})
		}
		if err != nil {
			return err
		}
		if id := msg.GetIdentifier(); id != nil {
			w, logName = ProxyWorkload(id.GetNode()), id.GetLogName()
		}
		logs := msg.GetHttpLogs().GetLogEntry()
		if len(logs) == 0 {
			// TCP entries have no request to filter on.
			continue
		}
		entries := make([]*observabilityv1.AccessLogEntry, len(logs))
		for i, e := range logs {
			entries[i] = convertHTTP(e, logName)
		}
		s.sink.Accept(w, entries)
	}
}

// ProxyWorkload reads the pod of a proxy from the node metadata Istio
// sets (NAME, NAMESPACE, LABELS), or from a sidecar node ID
// ("sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.<domain>") when the
// metadata lacks them.
func ProxyWorkload(n *corev3.Node) domain.ProxyWorkload {
	var w domain.ProxyWorkload
	md := n.GetMetadata().GetFields()
	w.Pod = md["NAME"].GetStringValue()
	w.Namespace = md["NAMESPACE"].GetStringValue()
	if labels := md["LABELS"].GetStructValue().GetFields(); len(labels) > 0 {
		w.Labels = make(map[string]string, len(labels))
		for k, v := range labels {
			w.Labels[k] = v.GetStringValue()
		}
	}
	if w.Pod == "" || w.Namespace == "" {
		if parts := strings.Split(n.GetId(), "~"); len(parts) == 4 {
			if pod, ns, ok := strings.Cut(parts[2], "."); ok {
				w.Pod, w.Namespace = pod, ns
			}
		}
	}
	return w
}

func convertHTTP(e *accesslogdatav3.HTTPAccessLogEntry, logName string) *observabilityv1.AccessLogEntry {
	c := e.GetCommonProperties()
	req, resp := e.GetRequest(), e.GetResponse()
	out := &observabilityv1.AccessLogEntry{
		StartTime:         c.GetStartTime(),
		Direction:         direction(c.GetUpstreamCluster(), logName),
		UpstreamCluster:   c.GetUpstreamCluster(),
		DownstreamAddress: address(c.GetDownstreamRemoteAddress()),
		UpstreamAddress:   address(c.GetUpstreamRemoteAddress()),
		Method:            req.GetRequestMethod().String(),
		Authority:         req.GetAuthority(),
		Path:              req.GetPath(),
		Protocol:          protocol(e.GetProtocolVersion()),
		ResponseCode:      resp.GetResponseCode().GetValue(),
		RequestBytes:      req.GetRequestBodyBytes(),
		ResponseBytes:     resp.GetResponseBodyBytes(),
		RequestId:         req.GetRequestId(),
		RequestHeaders:    domain.CloneHeaders(req.GetRequestHeaders()),
		ResponseHeaders:   domain.CloneHeaders(resp.GetResponseHeaders()),
	}
	if req.GetRequestMethod() == corev3.RequestMethod_METHOD_UNSPECIFIED {
		out.Method = ""
	}
	// The headers Envoy logs as fields of their own can be filtered and
	// included like any other.
	for _, h := range [...]struct{ name, v string }{{"user-agent", req.GetUserAgent()}, {"referer", req.GetReferer()}, {"x-forwarded-for", req.GetForwardedFor()}} {
		if h.v == "" {
			continue
		}
		if out.RequestHeaders == nil {
			out.RequestHeaders = make(map[string]string, 3)
		}
		if _, ok := out.RequestHeaders[h.name]; !ok {
			out.RequestHeaders[h.name] = h.v
		}
	}
	switch {
	case c.GetDuration() != nil:
		out.Duration = c.GetDuration()
	case c.GetTimeToLastDownstreamTxByte() != nil:
		out.Duration = durationpb.New(c.GetTimeToLastDownstreamTxByte().AsDuration())
	}
	return out
}

// direction tells inbound from outbound by Istio's cluster names
// ("inbound|...", "outbound|...", the passthrough clusters), then by the
// log name.
func direction(cluster, logName string) string {
	switch {
	case strings.HasPrefix(cluster, "inbound|"), cluster == "InboundPassthroughCluster", cluster == "InboundPassthroughClusterIpv4", cluster == "InboundPassthroughClusterIpv6":
		return "inbound"
	case strings.HasPrefix(cluster, "outbound|"), cluster == "PassthroughCluster", cluster == "BlackHoleCluster":
		return "outbound"
	case strings.Contains(strings.ToLower(logName), "inbound"):
		return "inbound"
	case strings.Contains(strings.ToLower(logName), "outbound"):
		return "outbound"
	}
	return ""
}

func address(a *corev3.Address) string {
	if sa := a.GetSocketAddress(); sa != nil {
		if sa.GetPortValue() == 0 {
			return sa.GetAddress()
		}
		return joinHostPort(sa.GetAddress(), sa.GetPortValue())
	}
	return a.GetPipe().GetPath()
}

func protocol(p accesslogdatav3.HTTPAccessLogEntry_HTTPVersion) string {
	switch p {
	case accesslogdatav3.HTTPAccessLogEntry_HTTP10:
		return "HTTP/1.0"
	case accesslogdatav3.HTTPAccessLogEntry_HTTP11:
		return "HTTP/1.1"
	case accesslogdatav3.HTTPAccessLogEntry_HTTP2:
		return "HTTP/2"
	case accesslogdatav3.HTTPAccessLogEntry_HTTP3:
		return "HTTP/3"
	}
	return ""
}

func joinHostPort(host string, port uint32) string {
	return net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
}
