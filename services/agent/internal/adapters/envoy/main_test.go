package envoy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The servers' streams, the forwarder and the gRPC connections all end
// with their tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
