module github.com/meshplane/meshplane/libs/revocation

go 1.26.0

replace github.com/meshplane/meshplane/libs/gen => ../gen

replace github.com/meshplane/meshplane/libs/platform => ../platform

replace github.com/meshplane/meshplane/libs/pki => ../pki

replace github.com/meshplane/meshplane/libs/kube => ../kube

replace github.com/meshplane/meshplane/libs/redistest => ../redistest

replace github.com/meshplane/meshplane/libs/snapshots => ../snapshots

replace github.com/meshplane/meshplane/services/registration => ../../services/registration

replace github.com/meshplane/meshplane/services/ingest => ../../services/ingest

replace github.com/meshplane/meshplane/services/translation => ../../services/translation

replace github.com/meshplane/meshplane/services/distribution => ../../services/distribution

replace github.com/meshplane/meshplane/services/agent => ../../services/agent

replace github.com/meshplane/meshplane/cmd/meshctl => ../../cmd/meshctl

replace github.com/meshplane/meshplane/cmd/meshplane => ../../cmd/meshplane

replace github.com/meshplane/meshplane/test/e2e => ../../test/e2e

require (
	github.com/meshplane/meshplane/libs/redistest v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
