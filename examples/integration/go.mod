module github.com/meshplane/meshplane/examples/integration

go 1.26.7

replace github.com/meshplane/meshplane/libs/gen => ../../libs/gen

replace github.com/meshplane/meshplane/libs/platform => ../../libs/platform

replace github.com/meshplane/meshplane/libs/pki => ../../libs/pki

replace github.com/meshplane/meshplane/libs/kube => ../../libs/kube

replace github.com/meshplane/meshplane/libs/redistest => ../../libs/redistest

replace github.com/meshplane/meshplane/libs/snapshots => ../../libs/snapshots

replace github.com/meshplane/meshplane/libs/revocation => ../../libs/revocation

replace github.com/meshplane/meshplane/services/registration => ../../services/registration

replace github.com/meshplane/meshplane/services/ingest => ../../services/ingest

replace github.com/meshplane/meshplane/services/translation => ../../services/translation

replace github.com/meshplane/meshplane/services/distribution => ../../services/distribution

replace github.com/meshplane/meshplane/services/agent => ../../services/agent

replace github.com/meshplane/meshplane/cmd/meshctl => ../../cmd/meshctl

replace github.com/meshplane/meshplane/cmd/meshplane => ../../cmd/meshplane

replace github.com/meshplane/meshplane/test/e2e => ../../test/e2e

require (
	connectrpc.com/connect v1.21.1
	github.com/meshplane/meshplane/libs/gen v0.0.0-00010101000000-000000000000
)

require google.golang.org/protobuf v1.36.13-0.20261016172727-e9ee2a76ab8e // indirect
