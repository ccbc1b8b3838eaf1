module github.com/meshplane/meshplane/libs/snapshots

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/meshplane/meshplane/libs/gen v0.0.0-00010101000000-000000000000
	github.com/meshplane/meshplane/libs/platform v0.0.0-00010101000000-000000000000
	github.com/meshplane/meshplane/libs/redistest v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	google.golang.org/protobuf v1.36.13-0.20261016172727-e9ee2a76ab8e
)

require (
	connectrpc.com/connect v1.21.1 // indirect
	connectrpc.com/grpchealth v1.5.0 // indirect
	connectrpc.com/grpcreflect v1.3.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/meshplane/meshplane/libs/pki v0.0.0-00010101000000-000000000000 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/meshplane/meshplane/libs/gen => ../gen

replace github.com/meshplane/meshplane/libs/platform => ../platform

replace github.com/meshplane/meshplane/libs/pki => ../pki

replace github.com/meshplane/meshplane/libs/kube => ../kube

replace github.com/meshplane/meshplane/libs/redistest => ../redistest

replace github.com/meshplane/meshplane/services/registration => ../../services/registration

replace github.com/meshplane/meshplane/services/ingest => ../../services/ingest

replace github.com/meshplane/meshplane/services/translation => ../../services/translation

replace github.com/meshplane/meshplane/services/distribution => ../../services/distribution

replace github.com/meshplane/meshplane/services/agent => ../../services/agent

replace github.com/meshplane/meshplane/cmd/meshctl => ../../cmd/meshctl

replace github.com/meshplane/meshplane/cmd/meshplane => ../../cmd/meshplane

replace github.com/meshplane/meshplane/test/e2e => ../../test/e2e

replace github.com/meshplane/meshplane/libs/revocation => ../revocation

replace github.com/meshplane/meshplane/examples/integration => ../../examples/integration
