package service

import (
	"flag"
	"maps"
	"strings"
	"testing"
)

func TestConfigDiscoveryFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"namespace selector", []string{"--namespace-selector", "team in (books,shop),!legacy"}, ""},
		{"bad namespace selector", []string{"--namespace-selector", "team in books"}, "--namespace-selector"},
		{"gateway labels", []string{"--east-west-gateway-labels", "istio=eastwestgateway,topology.istio.io/network=net1"}, ""},
		{"gateway labels that are no labels", []string{"--ingress-gateway-labels", "istio"}, "--ingress-gateway-labels"},
		{"empty gateway labels", []string{"--east-west-gateway-labels", ""}, "--east-west-gateway-labels"},
		{"empty tls port name", []string{"--gateway-tls-port-name", ""}, "--gateway-tls-port-name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("agent", flag.ContinueOnError)
			cfg.AddFlags(fs)
			args := append([]string{"--cluster", "east", "--relay-addr", "relay:9900", "--relay-ca-file", "ca.pem"}, tt.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDiscoveryOptions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EastWestGatewayLabels = "istio=eastwestgateway,topology.istio.io/network=net1"
	o := cfg.discoveryOptions()
	if !maps.Equal(o.IngressGatewayLabels, map[string]string{"istio": "ingressgateway"}) ||
		!maps.Equal(o.EastWestGatewayLabels, map[string]string{"istio": "eastwestgateway", "topology.istio.io/network": "net1"}) ||
		o.TLSPortName != "tls" {
		t.Errorf("options = %+v", o)
	}
}
