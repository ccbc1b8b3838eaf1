package domain

import "testing"

// TestHasSidecar: the injector's status annotation, an istio-proxy
// container, or an istio-proxy native sidecar (issue 16 item 7).
func TestHasSidecar(t *testing.T) {
	app := Container{Name: "app", Image: "app:1"}
	for _, tc := range []struct {
		name       string
		containers []Container
		annotated  bool
		want       bool
	}{
		{"plain pod", []Container{app}, false, false},
		{"istio-proxy container", []Container{app, {Name: "istio-proxy"}}, false, true},
		{"native sidecar", []Container{{Name: "istio-proxy", Init: true, RestartAlways: true}, app}, false, true},
		{"init container that runs to completion", []Container{{Name: "istio-proxy", Init: true}, app}, false, false},
		{"injector's status annotation, proxy renamed", []Container{app, {Name: "mesh-proxy"}}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HasSidecar(tc.containers, tc.annotated); got != tc.want {
				t.Errorf("HasSidecar = %v, want %v", got, tc.want)
			}
		})
	}
}
