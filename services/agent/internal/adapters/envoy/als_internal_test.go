package envoy

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestProxyWorkload(t *testing.T) {
	md, _ := structpb.NewStruct(map[string]any{"NAME": "reviews-v1-abc", "NAMESPACE": "bookinfo", "LABELS": map[string]any{"app": "reviews"}})
	tests := []struct {
		name          string
		node          *corev3.Node
		pod, ns, repo string
	}{
		{"metadata", &corev3.Node{Id: "ignored", Metadata: md}, "reviews-v1-abc", "bookinfo", "reviews"},
		{"sidecar id", &corev3.Node{Id: "sidecar~10.0.0.1~ratings-v1-x.prod~prod.svc.cluster.local"}, "ratings-v1-x", "prod", ""},
		{"unknown", &corev3.Node{Id: "router"}, "", "", ""},
		{"nil", nil, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ProxyWorkload(tt.node)
			if w.Pod != tt.pod || w.Namespace != tt.ns || w.Labels["app"] != tt.repo {
				t.Errorf("ProxyWorkload = %+v, want %s/%s app=%q", w, tt.ns, tt.pod, tt.repo)
			}
		})
	}
}

func TestDirection(t *testing.T) {
	for _, tt := range []struct{ cluster, logName, want string }{
		{"inbound|9080||", "", "inbound"},
		{"InboundPassthroughCluster", "", "inbound"},
		{"outbound|9080||reviews.bookinfo.svc.cluster.local", "", "outbound"},
		{"PassthroughCluster", "", "outbound"},
		{"", "virtualInbound-als", "inbound"},
		{"", "http_outbound", "outbound"},
		{"", "", ""},
	} {
		if got := direction(tt.cluster, tt.logName); got != tt.want {
			t.Errorf("direction(%q, %q) = %q, want %q", tt.cluster, tt.logName, got, tt.want)
		}
	}
}
