package istiotest

import (
	"fmt"
	"slices"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// AwaitRoutes waits until istiod's route configuration name satisfies ok,
// and returns it with the time it arrived. Unless the stream holds it
// already (from Routes or an earlier AwaitRoutes of name alone), it asks
// for it; then it checks each push of it, which istiod sends when its
// config changes. After timeout it gives up and closes the stream,
// returning the last configuration seen and an error.
func (a *ADS) AwaitRoutes(name string, timeout time.Duration, ok func(*routev3.RouteConfiguration) bool) (*routev3.RouteConfiguration, time.Time, error) {
	timer := time.AfterFunc(timeout, a.Close)
	defer timer.Stop()
	names := []string{name}
	subscribed := slices.Equal(a.routeNames, names)
	last := a.routes[name]
	if subscribed && last != nil && ok(last) {
		return last, time.Now(), nil
	}
	for {
		var resp *discoveryv3.DiscoveryResponse
		var err error
		if subscribed {
			resp, err = a.receive(TypeRoute, names)
		} else {
			resp, err = a.request(TypeRoute, names)
			a.routeNames, subscribed = names, true
		}
		at := time.Now()
		if err != nil {
			return last, at, fmt.Errorf("istiotest: route configuration %s: no push that satisfies the condition within %v: %w", name, timeout, err)
		}
		rcs, err := a.decodeRoutes(resp)
		if err != nil {
			return last, at, err
		}
		if rc, found := rcs[name]; found {
			last = rc
			if ok(rc) {
				return rc, at, nil
			}
		}
	}
}
