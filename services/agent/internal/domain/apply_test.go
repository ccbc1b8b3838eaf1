package domain

import (
	"slices"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

const (
	networking = "networking.istio.io/v1"
	security   = "security.istio.io/v1"
	extensions = "extensions.istio.io/v1alpha1"
)

func obj(apiVersion, kind, ns, name string) *snapshotv1.Object {
	return &snapshotv1.Object{ApiVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
}

func key(apiVersion, kind, ns, name string) ObjectKey {
	return ObjectKey{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
}

func keys(objs []*snapshotv1.Object) []ObjectKey {
	var out []ObjectKey
	for _, o := range objs {
		out = append(out, KeyOf(o))
	}
	return out
}

func TestOrderForApply(t *testing.T) {
	tests := []struct {
		name string
		in   []*snapshotv1.Object
		want []ObjectKey
	}{
		{
			name: "destination rule before the virtual service that routes to its subsets",
			in: []*snapshotv1.Object{
				obj(networking, "VirtualService", "bookinfo", "reviews"),
				obj(networking, "DestinationRule", "bookinfo", "reviews"),
			},
			want: []ObjectKey{
				key(networking, "DestinationRule", "bookinfo", "reviews"),
				key(networking, "VirtualService", "bookinfo", "reviews"),
			},
		},
		{
			name: "every kind, peer authentication first, unknown kinds last",
			in: []*snapshotv1.Object{
				obj(extensions, "WasmPlugin", "a", "w"),
				obj(networking, "Sidecar", "a", "s"),
				obj(security, "AuthorizationPolicy", "a", "ap"),
				obj(networking, "VirtualService", "a", "vs"),
				obj(networking, "Gateway", "a", "gw"),
				obj(networking, "DestinationRule", "a", "dr"),
				obj(networking, "ServiceEntry", "a", "se"),
				obj(security, "PeerAuthentication", "a", "pa"),
			},
			want: []ObjectKey{
				key(security, "PeerAuthentication", "a", "pa"),
				key(networking, "ServiceEntry", "a", "se"),
				key(networking, "DestinationRule", "a", "dr"),
				key(networking, "Gateway", "a", "gw"),
				key(networking, "VirtualService", "a", "vs"),
				key(security, "AuthorizationPolicy", "a", "ap"),
				key(extensions, "WasmPlugin", "a", "w"),
				key(networking, "Sidecar", "a", "s"),
			},
		},
		{
			name: "same kind by namespace, then name",
			in: []*snapshotv1.Object{
				obj(networking, "DestinationRule", "b", "a"),
				obj(networking, "DestinationRule", "a", "z"),
				obj(networking, "DestinationRule", "a", "b"),
			},
			want: []ObjectKey{
				key(networking, "DestinationRule", "a", "b"),
				key(networking, "DestinationRule", "a", "z"),
				key(networking, "DestinationRule", "b", "a"),
			},
		},
		{name: "empty", in: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := keys(tt.in)
			got := keys(OrderForApply(tt.in))
			if !slices.Equal(got, tt.want) {
				t.Errorf("order =\n%v\nwant\n%v", got, tt.want)
			}
			if !slices.Equal(keys(tt.in), before) {
				t.Errorf("OrderForApply reordered its input")
			}
		})
	}
}

func TestObsolete(t *testing.T) {
	tests := []struct {
		name    string
		desired []*snapshotv1.Object
		owned   []ObjectKey
		want    []ObjectKey
	}{
		{
			name: "owned and not desired, in reverse dependency order",
			desired: []*snapshotv1.Object{
				obj(networking, "DestinationRule", "bookinfo", "ratings"),
			},
			owned: []ObjectKey{
				key(security, "PeerAuthentication", "bookinfo", "default"),
				key(networking, "DestinationRule", "bookinfo", "reviews"),
				key(networking, "DestinationRule", "bookinfo", "ratings"),
				key(networking, "ServiceEntry", "bookinfo", "ext"),
				key(networking, "VirtualService", "bookinfo", "reviews"),
				key(security, "AuthorizationPolicy", "bookinfo", "allow"),
			},
			want: []ObjectKey{
				key(security, "AuthorizationPolicy", "bookinfo", "allow"),
				key(networking, "VirtualService", "bookinfo", "reviews"),
				key(networking, "DestinationRule", "bookinfo", "reviews"),
				key(networking, "ServiceEntry", "bookinfo", "ext"),
				key(security, "PeerAuthentication", "bookinfo", "default"),
			},
		},
		{
			name: "everything desired: nothing obsolete",
			desired: []*snapshotv1.Object{
				obj(networking, "DestinationRule", "a", "x"),
				obj(networking, "VirtualService", "a", "x"),
			},
			owned: []ObjectKey{
				key(networking, "VirtualService", "a", "x"),
				key(networking, "DestinationRule", "a", "x"),
			},
			want: nil,
		},
		{
			name:    "same name in another namespace or kind is not the desired object",
			desired: []*snapshotv1.Object{obj(networking, "DestinationRule", "a", "x")},
			owned: []ObjectKey{
				key(networking, "DestinationRule", "b", "x"),
				key(networking, "VirtualService", "a", "x"),
				key(networking, "DestinationRule", "a", "x"),
			},
			want: []ObjectKey{
				key(networking, "VirtualService", "a", "x"),
				key(networking, "DestinationRule", "b", "x"),
			},
		},
		{
			name:    "the cluster lists a desired object under another version of its group",
			desired: []*snapshotv1.Object{obj("networking.istio.io/v1beta1", "DestinationRule", "a", "x")},
			owned:   []ObjectKey{key(networking, "DestinationRule", "a", "x")},
			want:    nil,
		},
		{
			name:    "same kind and name in another group is another object",
			desired: []*snapshotv1.Object{obj("networking.example.com/v1", "DestinationRule", "a", "x")},
			owned:   []ObjectKey{key(networking, "DestinationRule", "a", "x")},
			want:    []ObjectKey{key(networking, "DestinationRule", "a", "x")},
		},
		{
			name:    "empty desired set: every owned object is obsolete",
			desired: nil,
			owned:   []ObjectKey{key(networking, "DestinationRule", "a", "x")},
			want:    []ObjectKey{key(networking, "DestinationRule", "a", "x")},
		},
		{name: "nothing owned", desired: []*snapshotv1.Object{obj(networking, "DestinationRule", "a", "x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Obsolete(tt.desired, tt.owned)
			if !slices.Equal(got, tt.want) {
				t.Errorf("obsolete =\n%v\nwant\n%v", got, tt.want)
			}
			for _, k := range got {
				for _, d := range tt.desired {
					if ObjectIDOf(k) == ObjectIDOf(KeyOf(d)) {
						t.Errorf("desired object %s returned as obsolete", k)
					}
				}
			}
		})
	}
}

func TestDenyByDefaultPolicyAppliesAfterAllowPolicies(t *testing.T) {
	deny := &snapshotv1.Object{ApiVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy", Namespace: "istio-system", Name: "global-access-policy", Spec: []byte("{}")}
	allow := &snapshotv1.Object{ApiVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy", Namespace: "zz-app", Name: "reviews", Spec: []byte(`{"action":"ALLOW"}`)}
	vs := &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "VirtualService", Namespace: "a", Name: "x"}
	got := OrderForApply([]*snapshotv1.Object{deny, allow, vs})
	if got[0] != vs || got[1] != allow || got[2] != deny {
		t.Fatalf("order = %s, %s, %s; want the VirtualService, the ALLOW policy, then the deny-by-default policy",
			got[0].GetName(), got[1].GetName(), got[2].GetName())
	}
}
